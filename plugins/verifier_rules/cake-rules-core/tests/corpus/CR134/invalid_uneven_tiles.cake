# target: h200
# A persistent loop over single tiles with a cluster barrier per tile: with an odd tile count the two
# CTAs of a cluster take different numbers of tiles, and the one with more waits forever for its peer.
kernel tiles(x: global bf16[B, N, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (w) over (C * cdiv(min(SMS, B * cdiv(N, R)), C))
  cta warps 4 cluster (C)
  role all warps 0..4:
    reg v: f32[R, 1] layout rows
    let TILES = B * cdiv(N, R)
    for tile in w .. TILES step C * cdiv(min(SMS, TILES), C):
      let b = tile / cdiv(N, R)
      let t = tile % cdiv(N, R)
      sumsq v <- x[b, t * R : +R, :], oob=zero
      store out[b, t * R : +R] <- v, oob=skip
      cluster.sync  # expect-error[CR134]
