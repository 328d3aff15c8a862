# target: h200
# Column starts of 28 bf16 (56 bytes) are not 16-byte aligned from the second step on; and rows of 2
# bf16 are 4 bytes, less than one 8-byte copy (the shared pitch too).
kernel stage(x: global bf16[N, 256], out: global f32[N])
  domain N >= 1
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 32]
  smem ys: bf16[R, 2]
  role all warps 0..4:
    reg s: f32[R] layout rows
    for k in 0 .. 8:
      cp.async xs <- x[t * R : +R, k * 28 : +32], oob=zero  # expect-error[CR105]
      cp.async.commit
      cp.async.wait pending=0
      bar.sync
    cp.async ys <- x[t * R : +R, 0 : +2], oob=zero, bytes=8  # expect-error[CR105]
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs
    store out[t * R : +R] <- s, oob=skip
