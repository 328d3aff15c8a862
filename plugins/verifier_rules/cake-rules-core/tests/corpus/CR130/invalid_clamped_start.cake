# target: h200
# One CTA too many, its start clamped into range: the last CTA stores the tile the one before it
# stores (the values are equal; the writes still race).
kernel norms(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (t, b) over (cdiv(N, R) + 1, B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    let row = min(t, cdiv(N, R) - 1) * R
    sumsq s <- x[b, row : +R, :], oob=zero
    store out[b, row : +R] <- s, oob=skip  # expect-error[CR130]
