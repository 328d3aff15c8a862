// The float64 oracle of knn and knn-ip, as a naive, independent CUDA reference.
//
// Compiled after kmeans-assign's reference.cu (cuda_reference.py joins the two texts): decode16,
// warp_sum, pos_inf and cake_ref_sqnorm come from there. Header-free, float64 throughout.
//
// s(q, x) is the metric's score, smaller is nearer: ||q - x||^2 for L2 (inner = 0), -q.x for the inner
// product (inner = 1). Rows are (b, m), row = b * M + m; cand[row, j] is the candidate's j-th neighbour.
// Launches, in order (after cake_ref_sqnorm for qq = ||q||^2 and xx = ||x||^2):
//   cake_knn_candidates  per (row, j): code, score = s(q, x[cand]) summed directly, and the threshold
//                        thr = score - rtol * (qq + xx[cand]) (-inf unless judged)   (one warp each)
//   cake_knn_sort        per row: sorted = its K thresholds, ascending                 (one thread per (row, j))
//   cake_knn_count       per row and every point n: where s = s(q, x[n]) < sorted[K - 1] (the largest
//                        threshold), hist[row, #{i : sorted[i] <= s}] += 1; where s < the row's reach (the
//                        largest score + tolerance of a judged element), (s, n) is appended to the row's
//                        `near` list while it has room (fill[row] counts every append, kept or not)
// The host turns hist into, per (row, j), the number of points scoring below thr[row, j]: rank j passes
// when at most j do. s over every (q, x) pair comes from the expansion qq + xx - 2 q.x (a register-tiled
// float64 product); its rounding, about D * 2^-53 * (qq + xx), is far below any tolerance applied.
//
// Codes written by cake_knn_candidates: 0 judged, 1 index out of [0, N), 2 index already returned at an
// earlier rank of the row, 3 score or threshold not finite.

__device__ __forceinline__ double neg_inf() { return __longlong_as_double((long long)0xfff0000000000000ULL); }

// One warp per (row, j): elements = B * M * K; 256 threads, 8 elements per block.
extern "C" __global__ void __launch_bounds__(256)
cake_knn_candidates(const u16* __restrict__ q, const u16* __restrict__ x, const int* __restrict__ cand,
                    const double* __restrict__ qq, const double* __restrict__ xx, int* __restrict__ code,
                    double* __restrict__ score, double* __restrict__ thr, long long elements, int M, int N,
                    int K, int D, int is_f16, int inner, float rtol) {
    const long long e = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (e >= elements) {
        return;  // the whole warp leaves together
    }
    const long long row = e / K;
    const int j = (int)(e % K);
    const long long b = row / M;
    const int* const list = cand + row * K;
    const int c = list[j];
    const bool in_range = c >= 0 && c < N;
    double repeats = 0.0;
    for (int i = lane; i < j; i += 32) {
        repeats += list[i] == c ? 1.0 : 0.0;
    }
    repeats = warp_sum(repeats);
    const long long point = b * N + (in_range ? c : 0);
    const u16* const qr = q + row * D;
    const u16* const xr = x + point * D;
    double s = 0.0;
    for (int d = lane; d < D; d += 32) {
        const double qv = decode16(qr[d], is_f16), xv = decode16(xr[d], is_f16);
        s += inner ? -(qv * xv) : (qv - xv) * (qv - xv);
    }
    s = warp_sum(s);
    if (lane == 0) {
        const double t = s - (double)rtol * (qq[row] + xx[point]);
        int verdict = 0;
        if (!in_range) {
            verdict = 1;
        } else if (repeats > 0.0) {
            verdict = 2;
        } else if (!(t - t == 0.0)) {  // NaN or infinite
            verdict = 3;
        }
        code[e] = verdict;
        score[e] = s;
        thr[e] = verdict == 0 ? t : neg_inf();
    }
}

// sorted[row, r] = thr[row, j] where r counts the thresholds of the row before it (smaller, or equal at a
// smaller j): one thread per (row, j), elements = B * M * K.
extern "C" __global__ void __launch_bounds__(256)
cake_knn_sort(const double* __restrict__ thr, double* __restrict__ sorted, long long elements, int K) {
    const long long e = (long long)blockIdx.x * 256 + threadIdx.x;
    if (e >= elements) {
        return;
    }
    const long long row = e / K;
    const int j = (int)(e % K);
    const double* const t = thr + row * K;
    const double v = t[j];
    int rank = 0;
    for (int i = 0; i < K; ++i) {
        rank += (t[i] < v || (t[i] == v && i < j)) ? 1 : 0;
    }
    sorted[row * K + rank] = v;
}

// cake_knn_count's tiles: a block of 256 threads (16 x 16) owns QT queries and a chunk of the points,
// swept PT at a time with SD-deep slices of both operands staged in shared memory as float64. Thread
// (ty, tx) computes the products of queries ty + 16 i with points tx + 16 j (i, j < 4).
#define QT 64
#define PT 64
#define SD 16

// Grid (cdiv(M, QT) * splits, B): block x = query tile + tiles * split; split s covers the points
// [s * chunk, (s + 1) * chunk), chunk a multiple of PT. hist [B * M, K] and fill [B * M] start at zero;
// near_s / near_i are [B * M, cap].
extern "C" __global__ void __launch_bounds__(256)
cake_knn_count(const u16* __restrict__ q, const u16* __restrict__ x, const double* __restrict__ qq,
               const double* __restrict__ xx, const double* __restrict__ score, const double* __restrict__ thr,
               const double* __restrict__ sorted, int* __restrict__ hist,
               int* __restrict__ fill, double* __restrict__ near_s, int* __restrict__ near_i, int M, int N,
               int K, int D, int is_f16, int inner, int tiles, int chunk, int cap) {
    __shared__ double qs[SD][QT + 1];  // padded: the staging writes, depth fastest, miss bank conflicts
    __shared__ double ps[SD][PT + 1];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int tile = blockIdx.x % tiles, split = blockIdx.x / tiles;
    const long long b = blockIdx.y;
    const int m0 = tile * QT;
    const int n_begin = split * chunk;
    const int n_end = min(N, n_begin + chunk);
    const u16* const qb = q + b * M * D;
    const u16* const xb = x + b * N * D;

    double limit[4], reach[4], qnorm[4];
    for (int i = 0; i < 4; ++i) {
        const int m = m0 + ty + 16 * i;
        const long long row = b * M + m;
        limit[i] = reach[i] = neg_inf();  // nothing passes a missing row
        qnorm[i] = 0.0;
        if (m < M) {
            limit[i] = sorted[row * K + K - 1];
            qnorm[i] = qq[row];
            for (int j = 0; j < K; ++j) {
                const double t = thr[row * K + j];
                if (t - t == 0.0) {  // judged: score + its tolerance
                    reach[i] = fmax(reach[i], 2.0 * score[row * K + j] - t);
                }
            }
        }
    }
    for (int n0 = n_begin; n0 < n_end; n0 += PT) {
        double acc[4][4] = {};
        for (int d0 = 0; d0 < D; d0 += SD) {
            for (int e = tid; e < QT * SD; e += 256) {  // zero outside the tensors
                const int r = e / SD, d = d0 + e % SD;
                const int m = m0 + r, n = n0 + r;
                qs[e % SD][r] = (m < M && d < D) ? decode16(qb[(long long)m * D + d], is_f16) : 0.0;
                ps[e % SD][r] = (n < n_end && d < D) ? decode16(xb[(long long)n * D + d], is_f16) : 0.0;
            }
            __syncthreads();
            for (int dd = 0; dd < SD; ++dd) {
                double qv[4], pv[4];
                for (int i = 0; i < 4; ++i) {
                    qv[i] = qs[dd][ty + 16 * i];
                    pv[i] = ps[dd][tx + 16 * i];
                }
                for (int i = 0; i < 4; ++i) {
                    for (int j = 0; j < 4; ++j) {
                        acc[i][j] += qv[i] * pv[j];
                    }
                }
            }
            __syncthreads();
        }
        for (int j = 0; j < 4; ++j) {
            const int n = n0 + tx + 16 * j;
            if (n >= n_end) {
                continue;
            }
            const double xn = xx[b * N + n];
            for (int i = 0; i < 4; ++i) {
                const double s = inner ? -acc[i][j] : qnorm[i] + xn - 2.0 * acc[i][j];
                if (!(s < reach[i])) {
                    continue;  // the common case: the point is far from every answer of the row
                }
                const long long row = b * M + m0 + ty + 16 * i;
                if (s < limit[i]) {
                    const double* const t = sorted + row * K;
                    int lo = 0, hi = K;  // how many thresholds are <= s
                    while (lo < hi) {
                        const int mid = (lo + hi) >> 1;
                        if (t[mid] <= s) {
                            lo = mid + 1;
                        } else {
                            hi = mid;
                        }
                    }
                    atomicAdd(&hist[row * K + lo], 1);
                }
                const int slot = atomicAdd(&fill[row], 1);
                if (slot < cap) {
                    near_s[row * cap + slot] = s;
                    near_i[row * cap + slot] = n;
                }
            }
        }
    }
}
