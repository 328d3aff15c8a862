# target: h200
# Near misses: a grid rounded up to whole pairs of CTAs (the extra CTA's rows are masked), a grid of
# whole clusters because the domain makes the tile count even (the trailing extents of 1 are no
# clusters along y and z), and a persistent grid rounded up to whole clusters of 4.
kernel pairs(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (t, b) over (2 * cdiv(N, 2 * R), B)
  cta warps 4 cluster (2)
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store out[b, t * R : +R] <- s, oob=skip

kernel even(x: global f32[N, 64], out: global f32[N])
  domain N >= 256, N % 256 == 0
  const R = 128
  grid (t) over (N / R)
  cta warps 4 cluster (2, 1, 1)
  role all warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :]
    store out[t * R : +R] <- s

kernel persistent(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (w) over (4 * cdiv(min(SMS, B * cdiv(N, R)), 4))
  cta warps 4 cluster (4)
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    let TILES = B * cdiv(N, R)
    for tile in w .. TILES step 4 * cdiv(min(SMS, TILES), 4):
      let b = tile / cdiv(N, R)
      let t = tile % cdiv(N, R)
      sumsq s <- x[b, t * R : +R, :], oob=zero
      store out[b, t * R : +R] <- s, oob=skip
