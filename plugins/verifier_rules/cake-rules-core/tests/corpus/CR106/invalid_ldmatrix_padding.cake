# target: a100
# 4 bf16 of padding make rows of 72 bytes: every other ldmatrix row address is not 16-byte aligned.
# (8-byte cp.async copies are fine with that pitch.)
kernel frag(x: global bf16[N, 32], out: global f32[N, 64])
  domain N >= 1
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 32] pad 4
  role main warps 0..4:
    reg a: bf16[R, 16] layout mma_a(4, 1)
    reg b: bf16[64, 16] layout mma_b(4, 1)
    reg acc: f32[R, 64] layout mma_acc(4, 1)
    fill acc, value=0.0
    fill b, value=1.0
    cp.async xs <- x[t * R : +R, :], oob=zero, bytes=8
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    for kk in 0 .. 2:
      ldmatrix a <- xs[:, kk * 16 : +16]  # expect-error[CR106]
      mma.sync acc <- a, b^T
    store out[t * R : +R, :] <- acc, oob=skip
