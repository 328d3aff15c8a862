# target: h200
# The last CTA's tile runs past N unless N is a multiple of 128, and the store is not masked.
kernel rownorm(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
    store out[t * R : +R] <- s  # expect-error[CR108]
