# target: h200
# Clusters of two CTAs over a grid of one CTA per tile of rows: at N = 1 (one tile) or N = 257 (three)
# the last CTA has no peer, so the launch fails.
kernel norms(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (t, b) over (cdiv(N, R), B)  # expect-error[CR131]
  cta warps 4 cluster (2)
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store out[b, t * R : +R] <- s, oob=skip
