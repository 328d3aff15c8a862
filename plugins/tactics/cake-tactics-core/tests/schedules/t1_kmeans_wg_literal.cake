# target: h200
# K-Means assignment, warp-specialized with wgmma consumer warpgroups (a test input of the warpgroups
# tactic): kmeans_assign_w3 with rows per CTA written in the size, as hopper.cake has them, and its
# warpgroup count written only as literals (`warps 4..12 per 4`, `cta warps 12`, `ROWS = BM / 2`).
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
  const BM = min(256, 32768 / D), BN = 128, S = 2
  const ROWS = BM / 2
  grid (t, b) over (cdiv(N, BM), B)
  cta warps 12 occupancy 1
  smem xs: T[1][BM, D] swizzle 128B
  smem cs: T[S][BN, D] swizzle 128B
  pipe xring: producer -> main of xs
  pipe cring: producer -> main of cs
  role producer warps 0..4:
    let NC = cdiv(K, BN)
    pipe.acquire xb <- xring
    tma.load xs[xb] <- x[b, t * BM : +BM, :]
    for kt in 0 .. NC:
      pipe.acquire s <- cring
      tma.load cs[s] <- c[b, kt * BN : +BN, :]
  role main warps 4..12 per 4:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg bv: f32[ROWS] layout wgmma_rows
    reg bi: i32[ROWS] layout wgmma_rows
    fill bv, value=inf
    fill bi, value=-1
    let NC = cdiv(K, BN)
    pipe.wait xb <- xring
    for kt in 0 .. NC:
      pipe.wait s <- cring
      wgmma acc <- xs[xb][self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip
      pipe.release cring[s]
    pipe.release xring[xb]
    argmin.reduce bv, bi <- bv, bi
    store out[b, t * BM + self * ROWS : +ROWS] <- bi, oob=skip
