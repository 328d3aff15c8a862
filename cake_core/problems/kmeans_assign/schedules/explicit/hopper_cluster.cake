# target: h200
# The explicit form of `../hopper_cluster.cake`: every mbarrier, stage index, phase parity and expect-tx
# byte count written by hand. A consumer gives a centroid stage back to the producers of both CTAs of its
# cluster (`mbarrier.arrive cempty[s], cluster`), whose `cempty` counts every consumer thread of the
# cluster; each rank's multicast half of a tile completes on `cfull` in both CTAs, so a producer expects
# the whole tile's bytes.
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
  const XS = min(2, 256 / D), S = max(2, 256 / D)
  const ROWS = BM / WG, C = 2, SLICE = BN / C
  grid (w) over (max(1, min(SMS / C, B * cdiv(cdiv(N, BM), C))) * C)
  cta warps 4 + 4 * WG occupancy 1 cluster (C)
  smem xs: T[XS][BM, D] swizzle 128B
  smem cs: T[S][BN, D] swizzle 128B
  smem csq: f32[S][BN]
  barrier xfull: mbarrier[XS] count 1
  barrier xempty: mbarrier[XS] count 128 * WG
  barrier cfull: mbarrier[S] count 1
  barrier cempty: mbarrier[S] count 128 * WG * C
  role producer warps 0..4 regs 40:
    let PT = cdiv(cdiv(N, BM), C)
    let ITEMS = B * PT
    let G = max(1, min(SMS / C, ITEMS))
    let NC = cdiv(K, BN)
    for item in w / C .. ITEMS step G:
      let it = (item - w / C) / G
      let b = item / PT
      let t = item % PT * C + crank
      let xb = it % XS
      mbarrier.wait xempty[xb], parity=(it / XS + 1) % 2
      mbarrier.arrive.expect_tx xfull[xb], bytes=BM * D * 2
      tma.load xs[xb] <- x[b, t * BM : +BM, :], xfull[xb]
      for kt in 0 .. NC:
        let g = it * NC + kt
        let s = g % S
        mbarrier.wait cempty[s], parity=(g / S + 1) % 2
        mbarrier.arrive.expect_tx cfull[s], bytes=BN * D * 2 + BN * 4
        tma.load cs[s][crank * SLICE : +SLICE, :] <- c[b, kt * BN + crank * SLICE : +SLICE, :], cfull[s], multicast
        tma.load csq[s] <- c_sq[b, kt * BN : +BN], cfull[s]
  role consumers warps 4..4 + 4 * WG per 4 regs 232:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg bv: f32[ROWS] layout wgmma_rows
    reg bi: i32[ROWS] layout wgmma_rows
    let PT = cdiv(cdiv(N, BM), C)
    let ITEMS = B * PT
    let G = max(1, min(SMS / C, ITEMS))
    let NC = cdiv(K, BN)
    for item in w / C .. ITEMS step G:
      let it = (item - w / C) / G
      let b = item / PT
      let t = item % PT * C + crank
      let xb = it % XS
      fill bv, value=inf
      fill bi, value=-1
      mbarrier.wait xfull[xb], parity=(it / XS) % 2
      for kt in 0 .. NC:
        let g = it * NC + kt
        let s = g % S
        mbarrier.wait cfull[s], parity=(g / S) % 2
        wgmma acc <- xs[xb][self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
        wgmma.commit
        wgmma.wait pending=0
        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
        mbarrier.arrive cempty[s], cluster
      mbarrier.arrive xempty[xb]
      argmin.reduce bv, bi <- bv, bi
      store out[b, t * BM + self * ROWS : +ROWS] <- bi, oob=skip
