// The float64 oracle of kmeans-assign, as a naive, independent CUDA reference.
//
// Header-free on purpose (NVRTC compiles it as is, no #include): 16-bit inputs are decoded from their
// raw bit patterns by hand, bf16 by shifting into the upper half of a float32, f16 by rebuilding the
// float64 bit pattern. Every value a verdict rests on is float64; nothing is computed in float32.
//
// Three launches, in order:
//   cake_ref_sqnorm   cc[b, k]      = ||c[b, k]||^2                      (one warp per centroid)
//   cake_ref_argmin   ref_idx[b, n] = argmin_k ||x[b, n] - c[b, k]||^2   (fp64 register-tiled GEMM)
//   cake_ref_verdict  per point: the candidate's index in range?  rel_gap = (d(x, c[cand]) - d(x, c[ref]))
//                     / (||x||^2 + ||c[ref]||^2), both distances summed directly as (x - c)^2
//                     (one warp per point). The host applies the tolerance: rel_gap <= rtol passes.
//
// Codes written by cake_ref_verdict: 0 judged (see rel_gap), 1 candidate index out of [0, K),
// 3 distances or scale not finite, 4 the reference's own index out of range (a bug of this file).

typedef unsigned short u16;

struct alignas(16) Pair {  // two float64 values, moved with one 16-byte shared-memory access
    double a, b;
};

__device__ __forceinline__ double pos_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

// bf16 or f16 bits (chosen by is_f16, uniform over the launch) to their exact float64 value.
__device__ __forceinline__ double decode16(u16 bits, int is_f16) {
    if (!is_f16) {
        return (double)__int_as_float((int)((unsigned)bits << 16));
    }
    const unsigned sign = bits >> 15, exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
    double v;
    if (exponent == 0u) {
        v = (double)mantissa * 5.9604644775390625e-08;  // zero or subnormal: mantissa * 2^-24
    } else if (exponent == 31u) {
        v = __longlong_as_double(0x7ff0000000000000LL | ((long long)mantissa << 42));  // inf or NaN
    } else {  // (1 + m / 2^10) * 2^(e - 15): float64 exponent e - 15 + 1023
        v = __longlong_as_double(((long long)(exponent + 1008u) << 52) | ((long long)mantissa << 42));
    }
    return sign ? -v : v;
}

__device__ __forceinline__ double warp_sum(double v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

// cc[row] = sum_d c[row, d]^2 over rows = B * K; 256 threads, one warp per row.
extern "C" __global__ void __launch_bounds__(256)
cake_ref_sqnorm(const u16* __restrict__ c, double* __restrict__ cc, long long rows, int D, int is_f16) {
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) {
        return;  // the whole warp leaves together
    }
    const u16* cr = c + row * D;
    double s = 0.0;
    for (int d = lane; d < D; d += 32) {
        const double v = decode16(cr[d], is_f16);
        s += v * v;
    }
    s = warp_sum(s);
    if (lane == 0) {
        cc[row] = s;
    }
}

// Tile sizes of cake_ref_argmin: a block of 256 threads owns TP points and sweeps every centroid in
// tiles of TK, staging TD-deep slices of both operands in shared memory as float64. Thread (ty, tx)
// of the 16 x 16 grid computes a 4 x 4 block of dot products: points {2ty, 2ty+1, 32+2ty, 33+2ty}
// against centroids {2tx, 2tx+1, 32+2tx, 33+2tx} of the tile, so that each warp's 16-byte reads of a
// shared-memory row are contiguous (no bank conflicts) and every float64 FMA needs a quarter of a
// shared-memory load.
#define TP 64
#define TK 64
#define TD 16
#define ROW_PAIRS 33  // 64 values + 2 of padding per shared row, in pairs

// ref_idx[b, n] = the smallest index among the k minimising ||c[b, k]||^2 - 2 x[b, n] . c[b, k]
// (float64; the expansion's rounding, about D * 2^-53 * (||x||^2 + ||c||^2), is far below any
// tolerance the oracle applies). Grid (ceil(N / TP), B), 256 threads (80 registers on sm_80 and sm_90:
// three blocks per SM; a minimum-blocks hint makes ptxas spill on sm_90a).
extern "C" __global__ void __launch_bounds__(256)
cake_ref_argmin(const u16* __restrict__ x, const u16* __restrict__ c, const double* __restrict__ cc,
                int* __restrict__ ref_idx, int N, int K, int D, int is_f16) {
    __shared__ Pair xs[TD][ROW_PAIRS];
    __shared__ Pair cs[TD][ROW_PAIRS];
    double* const xs_flat = &xs[0][0].a;
    double* const cs_flat = &cs[0][0].a;

    const int tid = threadIdx.x;
    const int tx = tid & 15;
    const int ty = tid >> 4;
    const long long b = blockIdx.y;
    const long long p0 = (long long)blockIdx.x * TP;
    const u16* const xb = x + b * N * D;
    const u16* const cb = c + b * K * D;
    const double* const ccb = cc + b * K;

    double best[4];
    int best_k[4];
    for (int i = 0; i < 4; ++i) {
        best[i] = pos_inf();
        best_k[i] = -1;
    }

    for (int k0 = 0; k0 < K; k0 += TK) {
        double acc[4][4];
        for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
                acc[i][j] = 0.0;
            }
        }
        for (int d0 = 0; d0 < D; d0 += TD) {
            // Stage x[p0 : p0+TP, d0 : d0+TD] and c[k0 : k0+TK, d0 : d0+TD], transposed, zero-filled
            // outside the tensors.
            for (int r = 0; r < (TP * TD) / 256; ++r) {
                const int e = r * 256 + tid;
                const int row = e >> 4;  // point or centroid within the tile
                const int col = e & 15;  // depth within the slice
                const int d = d0 + col;
                const long long p = p0 + row;
                const int k = k0 + row;
                double xv = 0.0, cv = 0.0;
                if (d < D && p < N) {
                    xv = decode16(xb[p * D + d], is_f16);
                }
                if (d < D && k < K) {
                    cv = decode16(cb[(long long)k * D + d], is_f16);
                }
                xs_flat[col * (2 * ROW_PAIRS) + row] = xv;
                cs_flat[col * (2 * ROW_PAIRS) + row] = cv;
            }
            __syncthreads();
#pragma unroll
            for (int dd = 0; dd < TD; ++dd) {
                const Pair x01 = xs[dd][ty], x23 = xs[dd][ty + 16];
                const Pair c01 = cs[dd][tx], c23 = cs[dd][tx + 16];
                const double xv[4] = {x01.a, x01.b, x23.a, x23.b};
                const double cv[4] = {c01.a, c01.b, c23.a, c23.b};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        acc[i][j] += xv[i] * cv[j];
                    }
                }
            }
            __syncthreads();
        }
        // Fold this tile into each point's running minimum; this thread's centroid indices increase,
        // so a strict comparison keeps the smallest index among equal distances.
        for (int j = 0; j < 4; ++j) {
            const int k = k0 + 2 * tx + (j & 1) + 32 * (j >> 1);
            if (k < K) {
                const double ck = ccb[k];
                for (int i = 0; i < 4; ++i) {
                    const double dist = ck - 2.0 * acc[i][j];
                    if (best_k[i] < 0 || dist < best[i]) {
                        best[i] = dist;
                        best_k[i] = k;
                    }
                }
            }
        }
    }

    // The 16 threads sharing ty are one half-warp: combine their minima, ties to the smaller index.
    for (int i = 0; i < 4; ++i) {
        for (int offset = 8; offset > 0; offset >>= 1) {
            const double other = __shfl_xor_sync(0xffffffffu, best[i], offset);
            const int other_k = __shfl_xor_sync(0xffffffffu, best_k[i], offset);
            if (other_k >= 0 &&
                (best_k[i] < 0 || other < best[i] || (other == best[i] && other_k < best_k[i]))) {
                best[i] = other;
                best_k[i] = other_k;
            }
        }
    }
    if (tx == 0) {
        for (int i = 0; i < 4; ++i) {
            const long long p = p0 + 2 * ty + (i & 1) + 32 * (i >> 1);
            if (p < N) {
                ref_idx[b * N + p] = best_k[i];
            }
        }
    }
}

// One warp per point (points = B * N); 256 threads, 8 points per block.
extern "C" __global__ void __launch_bounds__(256)
cake_ref_verdict(const u16* __restrict__ x, const u16* __restrict__ c, const int* __restrict__ cand,
                 const int* __restrict__ ref_idx, double* __restrict__ rel_gap, int* __restrict__ code,
                 long long points, int N, int K, int D, int is_f16) {
    const long long point = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (point >= points) {
        return;  // the whole warp leaves together
    }
    const long long b = point / N;
    const int chosen = cand[point];
    const int ref = ref_idx[point];
    const bool chosen_ok = chosen >= 0 && chosen < K;
    const bool ref_ok = ref >= 0 && ref < K;
    const u16* const xr = x + point * D;
    const u16* const cr = c + (b * K + (chosen_ok ? chosen : 0)) * D;
    const u16* const mr = c + (b * K + (ref_ok ? ref : 0)) * D;

    double xx = 0.0, d_chosen = 0.0, d_min = 0.0, mm = 0.0;
    for (int d = lane; d < D; d += 32) {
        const double xv = decode16(xr[d], is_f16);
        const double cv = decode16(cr[d], is_f16);
        const double mv = decode16(mr[d], is_f16);
        xx += xv * xv;
        d_chosen += (xv - cv) * (xv - cv);
        d_min += (xv - mv) * (xv - mv);
        mm += mv * mv;
    }
    xx = warp_sum(xx);
    d_chosen = warp_sum(d_chosen);
    d_min = warp_sum(d_min);
    mm = warp_sum(mm);

    if (lane == 0) {
        int verdict = 0;
        double rel = 0.0;
        const double gap = d_chosen - d_min;
        const double scale = xx + mm;
        if (!ref_ok) {
            verdict = 4;
            rel = pos_inf();
        } else if (!chosen_ok) {
            verdict = 1;
            rel = pos_inf();
        } else if (!(gap - gap == 0.0) || !(scale - scale == 0.0)) {  // NaN or infinite
            verdict = 3;
            rel = pos_inf();
        } else if (scale > 0.0) {
            rel = gap / scale;
        } else {
            rel = gap > 0.0 ? pos_inf() : 0.0;
        }
        rel_gap[point] = rel;
        code[point] = verdict;
    }
}
