# target: a100
# K is a run-time size: at K=65 rows of `x` are 130 bytes apart, not 16-byte aligned. And 4 bf16 of
# padding make the shared rows 136 bytes apart.
kernel stage(x: global bf16[N, K], out: global f32[N])
  domain N >= 1, K >= 64
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 64] pad 4
  role all warps 0..4:
    reg s: f32[R] layout rows
    cp.async xs <- x[t * R : +R, 0 : +64], oob=zero  # expect-error[CR105]
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs
    store out[t * R : +R] <- s, oob=skip
