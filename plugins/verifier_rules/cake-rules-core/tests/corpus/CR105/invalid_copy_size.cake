# target: a100
# cp.async copies 4, 8 or 16 bytes per thread; 12 is not an instruction.
kernel stage(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 64] pad 8
  role all warps 0..4:
    reg s: f32[R] layout rows
    cp.async xs <- x[t * R : +R, :], oob=zero, bytes=12  # expect-error[CR105]
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs
    store out[t * R : +R] <- s, oob=skip
