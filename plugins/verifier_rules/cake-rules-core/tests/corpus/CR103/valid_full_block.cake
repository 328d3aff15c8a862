# target: a100
# 32 warps (1024 threads, the maximum) split between two adjacent roles that cover every warp.
kernel split(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 32
  role loader warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
  role writers warps 4..32 per 4:
    reg v: f32[R] layout rows
    fill v, value=0.0
    if self == 0:
      store out[t * R : +R] <- v, oob=skip
