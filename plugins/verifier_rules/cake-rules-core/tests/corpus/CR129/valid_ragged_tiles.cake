# target: h200
# Near misses: every partial tile is covered (a grid over cdiv tiles, a persistent loop over cdiv
# tiles, masked stores), and the padding columns of a program buffer that nothing reads need not be
# written: only the program's parameters are outputs.
program norms2(x: global T[B, N, D], c: global T[B, K, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128}
  buffer c_sq: global f32[B, cdiv(K, 4) * 4]
  launch padded(c, c_sq)
  launch norms(x, out)
  launch persistent(x, out)

kernel padded(c: global T[B, K, D], c_sq: global f32[B, KP])
  domain T in {bf16, f16}, B >= 1, K >= 1, KP >= K, D in {64, 128}
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- c[b, t * R : +R, :], oob=zero
    store c_sq[b, t * R : +R] <- s, oob=skip

kernel norms(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store out[b, t * R : +R] <- s, oob=skip

kernel persistent(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (w) over (min(SMS, B * cdiv(N, R)))
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    let TILES = B * cdiv(N, R)
    for tile in w .. TILES step min(SMS, TILES):
      let b = tile / cdiv(N, R)
      let t = tile % cdiv(N, R)
      sumsq s <- x[b, t * R : +R, :], oob=zero
      store out[b, t * R : +R] <- s, oob=skip
