program kmeans_assign(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer c_sq: global f32[B, cdiv(K, 4) * 4]
  launch centroid_norms(c, c_sq)
  launch assign(x, c, c_sq, out)

kernel centroid_norms(c: global T[B, K, D], c_sq: global f32[B, KP])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}, KP % 4 == 0, KP >= K
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- c[b, t * R : +R, :], oob=zero
    store c_sq[b, t * R : +R] <- s, oob=skip

kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, KP], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}, KP % 4 == 0, KP >= K
  const R = 128
  const BN = 64
  const WM = 4
  const WN = 2
  const S = 2
  const WG = 1
  const ROWS = R / WG
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4 + 4 * WG
  smem xs: T[2][R, D] swizzle 128B align 128
  smem cs: T[S][BN, D] swizzle 128B align 128
  smem c_sq_s: f32[S][BN] align 128
  pipe xring: producer -> all of xs
  pipe cring: producer -> all of cs, c_sq_s
  role producer warps 0..4:
    pipe.acquire xb <- xring
    tma.load xs[xb] <- x[b, t * R : +R, :]
    for kt in 0 .. cdiv(K, BN):
      pipe.acquire s <- cring
      tma.load cs[s] <- c[b, kt * BN : +BN, :]
      tma.load c_sq_s[s] <- c_sq[b, kt * BN : +BN]
  role all warps 4..4 + 4 * WG per 4:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg bv: f32[ROWS] layout wgmma_rows
    reg bi: i32[ROWS] layout wgmma_rows
    fill bv, value=inf
    fill bi, value=-1
    pipe.wait xb <- xring
    for kt in 0 .. cdiv(K, BN):
      pipe.wait s <- cring
      wgmma acc <- xs[xb, self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      argmin.update bv, bi <- acc, c_sq_s[s], base=kt * BN, scale=-2.0, limit=K
      pipe.release cring[s]
    pipe.release xring[xb]
    argmin.reduce bv, bi <- bv, bi
    store out[b, t * R + self * ROWS : +ROWS] <- bi, oob=skip
