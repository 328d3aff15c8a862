# target: h200
# Rows 0..63 of `xs` are copied in; the reduction reads all 128 rows.
kernel norms(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 64] pad 8
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    cp.async xs[0 : +64, :] <- x[t * R : +64, :], oob=zero
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs  # expect-error[CR127]
    store out[t * R : +R] <- s, oob=skip
