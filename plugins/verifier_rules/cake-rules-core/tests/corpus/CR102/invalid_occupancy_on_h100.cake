# target: h100
# 120 KiB per CTA fits one block of sm_90, but two resident CTAs need 242 KiB and an SM has 228 KiB.
kernel stage(x: global f32[N, 240], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4 occupancy 2  # expect-error[CR102]
  smem xs: f32[R, 240]
  role all warps 0..4:
    reg s: f32[R] layout rows
    cp.async xs <- x[t * R : +R, :], oob=zero
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs
    store out[t * R : +R] <- s, oob=skip
