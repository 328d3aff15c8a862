# target: h200
# K-Means assignment on Hopper: a persistent, warp-specialized kernel. One producer warpgroup streams
# each CTA's rows of x and every centroid tile through TMA into 128B-swizzled shared memory, gated by
# mbarriers; two consumer warpgroups multiply with wgmma straight from shared memory and fold each
# centroid tile into a running argmin in registers. Distances never leave the SM.
program kmeans_assign(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  # rows of c_sq padded to a multiple of 4 floats: the tensor map over it needs 16-byte row strides
  buffer c_sq: global f32[B, cdiv(K, 4) * 4]
  launch centroid_norms(c, c_sq)
  launch assign(x, c, c_sq, out)

# ||c||^2 for every centroid, one row per thread
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
  # 256 rows a CTA where they fit (each centroid tile then crosses L2 once for 256 points), 128 at
  # D=256; at most 192 KiB of shared memory; deeper centroid rings where rows are short
  const BM = min(256, 32768 / D), BN = 128, WG = 2
  const XS = min(2, 256 / D), S = 2
  const ROWS = BM / WG
  grid (w) over (min(SMS, B * cdiv(N, BM)))
  cta warps 4 + 4 * WG occupancy 1
  smem xs: T[XS][BM, D] swizzle 128B
  smem cs: T[S][BN, D] swizzle 128B
  smem csq: f32[S][BN]
  # rings from the producer to the consumers: their barriers, stage indices, phase parities, arrival
  # counts and transaction bytes are derived by the compiler
  pipe xring: producer -> consumers of xs
  pipe cring: producer -> consumers of cs, csq
  role producer warps 0..4 regs 40:
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
  role consumers warps 4..4 + 4 * WG per 4 regs 232:
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
        wgmma acc <- xs[xb][self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
        wgmma.commit
        wgmma.wait pending=0
        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
        pipe.release cring[s]
      pipe.release xring[xb]
      argmin.reduce bv, bi <- bv, bi
      store out[b, t * BM + self * ROWS : +ROWS] <- bi, oob=skip
