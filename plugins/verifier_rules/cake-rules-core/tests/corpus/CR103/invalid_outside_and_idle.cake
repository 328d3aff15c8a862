# target: a100
# The second role's warps 8..12 are not in an 8-warp CTA, and warps 4..8 have no role.
kernel split(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 8  # expect-error[CR103]
  role loader warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
  role writer warps 8..12:  # expect-error[CR103]
    reg v: f32[R] layout rows
    fill v, value=0.0
    store out[t * R : +R] <- v, oob=skip
