# target: a100
# A cluster of two CTAs on sm_80, which has no thread-block clusters.
kernel rownorm(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4 cluster (2, 1)  # expect-error[CR101]
  role all warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
    store out[t * R : +R] <- s, oob=skip
