# target: a100
# The fragment starts 4 bf16 (8 bytes) into each row: not a 16-byte-aligned ldmatrix row address.
kernel frag(x: global bf16[N, 32], out: global f32[N, 64])
  domain N >= 1
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 32] pad 8
  role main warps 0..4:
    reg a: bf16[R, 16] layout mma_a(4, 1)
    reg b: bf16[64, 16] layout mma_b(4, 1)
    reg acc: f32[R, 64] layout mma_acc(4, 1)
    fill acc, value=0.0
    fill b, value=1.0
    cp.async xs <- x[t * R : +R, :], oob=zero
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    ldmatrix a <- xs[:, 4 : +16]  # expect-error[CR106]
    mma.sync acc <- a, b^T
    store out[t * R : +R, :] <- acc, oob=skip
