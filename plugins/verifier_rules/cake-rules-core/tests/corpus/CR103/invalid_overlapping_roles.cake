# target: a100
# Warps 2 and 3 are claimed by both roles.
kernel split(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 8
  role loader warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
  role writer warps 2..8:  # expect-error[CR103]
    reg v: f32[R] layout rows
    fill v, value=0.0
    store out[t * R : +R] <- v, oob=skip
