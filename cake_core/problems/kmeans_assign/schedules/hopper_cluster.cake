# target: h200
# K-Means assignment on Hopper with thread-block clusters: `hopper.cake` with clusters of C = 2 CTAs
# that walk row tiles of the same batch in step and share every centroid tile. Each rank copies its
# half of a tile with a multicast TMA that lands in both CTAs' shared memory, so a centroid tile
# crosses L2 once per cluster instead of once per CTA; the ring is a cluster pipe (a stage is refilled
# only once the consumers of both CTAs released it). x stays per CTA. A batch with an odd number of row
# tiles leaves rank 1 one tile past the end: it still takes every centroid stage (its peer waits on its
# release), loads zeros and stores nothing.
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
  const XS = min(2, 256 / D), S = max(2, 256 / D)
  const ROWS = BM / WG, C = 2, SLICE = BN / C
  # a work item is C row tiles of one batch, one per rank; the grid is whole clusters
  grid (w) over (max(1, min(SMS / C, B * cdiv(cdiv(N, BM), C))) * C)
  cta warps 4 + 4 * WG occupancy 1 cluster (C)
  smem xs: T[XS][BM, D] swizzle 128B
  smem cs: T[S][BN, D] swizzle 128B
  smem csq: f32[S][BN]
  # rings from the producer to the consumers: their barriers, stage indices, phase parities, arrival
  # counts and transaction bytes are derived by the compiler; cring's stages are the cluster's
  pipe xring: producer -> consumers of xs
  pipe cring: producer -> consumers of cs, csq cluster
  role producer warps 0..4 regs 40:
    let PT = cdiv(cdiv(N, BM), C)
    let ITEMS = B * PT
    let G = max(1, min(SMS / C, ITEMS))
    let NC = cdiv(K, BN)
    for item in w / C .. ITEMS step G:
      let b = item / PT
      let t = item % PT * C + crank
      pipe.acquire xb <- xring
      tma.load xs[xb] <- x[b, t * BM : +BM, :]
      for kt in 0 .. NC:
        pipe.acquire s <- cring
        tma.load cs[s][crank * SLICE : +SLICE, :] <- c[b, kt * BN + crank * SLICE : +SLICE, :], multicast
        tma.load csq[s] <- c_sq[b, kt * BN : +BN]
  role consumers warps 4..4 + 4 * WG per 4 regs 232:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg bv: f32[ROWS] layout wgmma_rows
    reg bi: i32[ROWS] layout wgmma_rows
    let PT = cdiv(cdiv(N, BM), C)
    let ITEMS = B * PT
    let G = max(1, min(SMS / C, ITEMS))
    let NC = cdiv(K, BN)
    for item in w / C .. ITEMS step G:
      let b = item / PT
      let t = item % PT * C + crank
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
