# target: h200
# Brute-force k nearest neighbours with a fused top-k, on the Ampere path. Each CTA keeps BM queries
# in shared memory and streams tiles of BN points, BK dimensions at a time, through a cp.async ring;
# mma.sync scores the queries against each tile (q.x, fp32). The finished tile goes through shared
# memory to the top-k epilogue, which folds ||x||^2 - 2 q.x into sorted per-query lists held in
# registers across the whole loop: P threads per query, each with every P-th column. The lists merge
# at the end (by shuffles, then through `red` to the query's thread) and only the indices reach global
# memory.
program knn(q: global T[B, M, D], x: global T[B, N, D], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  buffer x_sq: global f32[B, N]
  launch point_norms(x, x_sq)
  launch topk(q, x, x_sq, out)

# ||x||^2 for every point, one row per thread
kernel point_norms(x: global T[B, N, D], x_sq: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store x_sq[b, t * R : +R] <- s, oob=skip

kernel topk(q: global T[B, M, D], x: global T[B, N, D], x_sq: global f32[B, N], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  const BM = 128, BN = 64, BK = 32, S = 3, WM = 4, WN = 2, P = 2
  const KC = D / BK
  grid (t, b) over (cdiv(M, BM), B)
  cta warps WM * WN occupancy 1
  smem qs: T[BM, D] pad 8
  smem xs: T[S][BN, BK] pad 8
  smem sc: f32[BM, BN] pad 4
  smem red: f32[BM, 2 * K] pad 4
  role main warps 0..WM * WN:
    reg acc: f32[BM, BN] layout mma_acc(WM, WN)
    reg a: T[BM, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg tv: f32[BM * P, K] layout rows
    reg ti: i32[BM * P, K] layout rows
    reg fv: f32[BM, K] layout rows
    reg fi: i32[BM, K] layout rows
    fill tv, value=inf
    fill ti, value=-1
    fill acc, value=0.0
    let NT = cdiv(N, BN) * KC
    cp.async qs <- q[b, t * BM : +BM, :], oob=zero
    for p in 0 .. S - 1:
      if p < NT:
        cp.async xs[p] <- x[b, p / KC * BN : +BN, p % KC * BK : +BK], oob=zero
      cp.async.commit
    for i in 0 .. NT:
      cp.async.wait pending=S - 2
      bar.sync
      let kc = i % KC
      for kk in 0 .. BK / 16:
        ldmatrix a <- qs[:, kc * BK + kk * 16 : +16]
        ldmatrix bt <- xs[i % S][:, kk * 16 : +16]
        mma.sync acc <- a, bt^T
      let j = i + S - 1
      if j < NT:
        cp.async xs[j % S] <- x[b, j / KC * BN : +BN, j % KC * BK : +BK], oob=zero
      cp.async.commit
      if kc == KC - 1:
        # the finished tile of q.x goes through shared memory to the per-query lists
        store sc <- acc
        bar.sync
        topk.update tv, ti <- sc, x_sq[b, i / KC * BN : +BN], base=i / KC * BN, k=K, scale=-2.0, split=P, oob=skip
        fill acc, value=0.0
    topk.reduce fv, fi <- tv, ti, red, k=K
    store out[b, t * BM : +BM, :] <- fi, oob=skip
