# target: h200
# Near misses: each warpgroup stores its own half of the tile (offset by `self`); one instance storing
# the same rows twice (a value rewritten) is not an overlap; `counts` is updated with atomics by
# every CTA, which is not an output written once.
kernel norms(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const BM = 256, ROWS = 128
  grid (t, b) over (cdiv(N, BM), B)
  cta warps 8
  role halves warps 0..8 per 4:
    reg s: f32[ROWS, 1] layout rows
    fill s, value=0.0
    store out[b, t * BM + self * ROWS : +ROWS] <- s, oob=skip
    sumsq s <- x[b, t * BM + self * ROWS : +ROWS, :], oob=zero
    store out[b, t * BM + self * ROWS : +ROWS] <- s, oob=skip
