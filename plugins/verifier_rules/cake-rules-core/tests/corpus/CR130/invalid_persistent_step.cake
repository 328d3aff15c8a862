# target: h200
# A persistent loop that steps by one tile instead of by the grid: every CTA stores every tile from
# its first one on.
kernel norms(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (w) over (min(SMS, B * cdiv(N, R)))
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    let TILES = B * cdiv(N, R)
    for tile in w .. TILES:
      let b = tile / cdiv(N, R)
      let t = tile % cdiv(N, R)
      sumsq s <- x[b, t * R : +R, :], oob=zero
      store out[b, t * R : +R] <- s, oob=skip  # expect-error[CR130]
