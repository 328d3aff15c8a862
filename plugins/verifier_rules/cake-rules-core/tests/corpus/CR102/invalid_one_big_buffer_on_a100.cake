# target: a100
# 168 KiB of staging on sm_80, whose blocks may have at most 163 KiB.
kernel stage(x: global f32[N, 336], out: global f32[N])  # expect-error[CR102]
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: f32[R, 336]
  role all warps 0..4:
    reg s: f32[R] layout rows
    cp.async xs <- x[t * R : +R, :], oob=zero
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs
    store out[t * R : +R] <- s, oob=skip
