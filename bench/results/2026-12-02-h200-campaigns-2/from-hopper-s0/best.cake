program kmeans_assign(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer c_sq: global f32[B, cdiv(K, 4) * 4]
  launch centroid_norms(c, c_sq)
  launch assign(x, c, c_sq, out)

kernel centroid_norms(c: global T[B, K, D], c_sq: global f32[B, KP])
  domain T in {bf16, f16}, B >= 1, K >= 1, KP >= K, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- c[b, t * R : +R, :], oob=zero
    store c_sq[b, t * R : +R] <- s, oob=skip

kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, KP], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, KP % 4 == 0, KP >= K, D in {64, 128, 256}
  const BM = min(256, 32768 / D)
  const BN = 128
  const WG = 2
  const XS = min(2, 256 / D)
  const S = max(2, 256 / D)
  const ROWS = BM / WG
  grid (w) over (min(SMS, B * cdiv(N, BM)))
  cta warps 4 + 4 * WG occupancy 1
  smem xs: T[XS][BM, D] swizzle 128B
  smem cs: T[S][BN, D] swizzle 128B
  smem csq: f32[S][BN]
  pipe xring: producer -> consumers of xs
  pipe cring: producer -> consumers of cs, csq
  role producer warps 0..4 regs 56:
    let TILES = B * cdiv(N, BM)
    let G = min(SMS, TILES)
    let NC = cdiv(K, BN)
    for tile in w .. TILES step G:
      let b = tile / cdiv(N, BM)
      let t = tile % cdiv(N, BM)
      pipe.acquire xb <- xring
      tma.load xs[xb] <- x[b, t * BM : +BM, :]
      for kt in 0 .. NC:
        pipe.acquire s <- cring
        tma.load cs[s] <- c[b, kt * BN : +BN, :]
        tma.load csq[s] <- c_sq[b, kt * BN : +BN]
  role consumers warps 4..4 + 4 * WG per 4 regs 224:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg bv: f32[ROWS] layout wgmma_rows
    reg bi: i32[ROWS] layout wgmma_rows
    let TILES = B * cdiv(N, BM)
    let G = min(SMS, TILES)
    let NC = cdiv(K, BN)
    for tile in w .. TILES step G:
      let b = tile / cdiv(N, BM)
      let t = tile % cdiv(N, BM)
      fill bv, value=inf
      fill bi, value=-1
      pipe.wait xb <- xring
      for kt in 0 .. NC:
        pipe.wait s <- cring
        wgmma acc <- xs[xb, self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
        wgmma.commit
        wgmma.wait pending=0
        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
        pipe.release cring[s]
      pipe.release xring[xb]
      argmin.reduce bv, bi <- bv, bi
      store out[b, t * BM + self * ROWS : +ROWS] <- bi, oob=skip
