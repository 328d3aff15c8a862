# target: h200
# 36 warps are 1152 threads; a block has at most 1024 on every NVIDIA target.
kernel rownorm(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 1152
  grid (t) over (cdiv(N, R))
  cta warps 36  # expect-error[CR103]
  role all warps 0..36:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
    store out[t * R : +R] <- s, oob=skip
