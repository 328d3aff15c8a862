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
  const BM = 128, BN = 128, BK = 32, S = 3, WM = 4, WN = 2
  const KC = D / BK
  grid (t, b) over (cdiv(N, BM), B)
  cta warps 4 + WM * WN occupancy 1
  smem xs: T[1][BM, D] align 128
  smem cs: T[S][BN, BK] align 128
  smem red: f32[2, BM, WN]
  pipe xring: producer -> main of xs
  pipe cring: producer -> main of cs
  role producer warps 0..4:
    let NT = cdiv(K, BN) * KC
    pipe.acquire xb <- xring
    tma.load xs[xb] <- x[b, t * BM : +BM, :]
    for i in 0 .. NT:
      pipe.acquire s <- cring
      tma.load cs[s] <- c[b, i / KC * BN : +BN, i % KC * BK : +BK]
  role main warps 4..4 + WM * WN:
    reg acc: f32[BM, BN] layout mma_acc(WM, WN)
    reg a: T[BM, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg bv: f32[BM] layout mma_rows(WM, WN)
    reg bi: i32[BM] layout mma_rows(WM, WN)
    reg rv: f32[BM] layout rows
    reg ri: i32[BM] layout rows
    fill bv, value=inf
    fill bi, value=-1
    fill acc, value=0.0
    let NT = cdiv(K, BN) * KC
    pipe.wait xb <- xring
    for i in 0 .. NT:
      pipe.wait s <- cring
      let kc = i % KC
      for kk in 0 .. BK / 16:
        ldmatrix a <- xs[xb][:, kc * BK + kk * 16 : +16]
        ldmatrix bt <- cs[s][:, kk * 16 : +16]
        mma.sync acc <- a, bt^T
      pipe.release cring[s]
      if kc == KC - 1:
        argmin.update bv, bi <- acc, c_sq[b, i / KC * BN : +BN], base=i / KC * BN, scale=-2.0, oob=skip
        fill acc, value=0.0
    pipe.release xring[xb]
    argmin.reduce rv, ri <- bv, bi, red
    store out[b, t * BM : +BM] <- ri, oob=skip
