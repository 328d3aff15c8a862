# target: h200
# K-Means assignment on the Ampere path: each CTA keeps its rows of x in shared memory, streams
# centroid k-chunks through a cp.async ring, feeds mma.sync from ldmatrix, and folds each finished
# centroid tile into a running argmin, so distances never reach global memory.
program kmeans_assign(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer c_sq: global f32[B, K]
  launch centroid_norms(c, c_sq)
  launch assign(x, c, c_sq, out)

# ||c||^2 for every centroid, one row per thread
kernel centroid_norms(c: global T[B, K, D], c_sq: global f32[B, K])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- c[b, t * R : +R, :], oob=zero
    store c_sq[b, t * R : +R] <- s, oob=skip

kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, K], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const BM = 128, BN = 64, WM = 4, WN = 2
  grid (t, b) over (cdiv(N, BM), B)
  cta warps WM * WN
  smem xs: T[BM, D] pad 8
  smem cs: T[BN, D] pad 8
  smem red: f32[2, BM, WN]
  role main warps 0..WM * WN:
    reg acc: f32[BM, BN] layout mma_acc(WM, WN)
    reg a: T[BM, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg bv: f32[BM] layout mma_rows(WM, WN)
    reg bi: i32[BM] layout mma_rows(WM, WN)
    reg rv: f32[BM] layout rows
    reg ri: i32[BM] layout rows
    fill bv, value=inf
    fill bi, value=-1
    cp.async xs <- x[b, t * BM : +BM, :], oob=zero
    for kt in 0 .. cdiv(K, BN):
      cp.async cs <- c[b, kt * BN : +BN, :], oob=zero
      cp.async.commit
      cp.async.wait pending=0
      bar.sync
      fill acc, value=0.0
      for kk in 0 .. D / 16:
        ldmatrix a <- xs[:, kk * 16 : +16]
        ldmatrix bt <- cs[:, kk * 16 : +16]
        mma.sync acc <- a, bt^T
      argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip
      bar.sync
    argmin.reduce rv, ri <- bv, bi, red
    store out[b, t * BM : +BM] <- ri, oob=skip
