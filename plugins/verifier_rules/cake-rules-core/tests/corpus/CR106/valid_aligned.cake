# target: h200
# The near misses: 8 bf16 of padding (rows of 80 bytes), fragments at multiples of 16 columns, and a
# divisibility clause that keeps every row of `x` 16-byte aligned.
kernel frag(x: global bf16[N, D], out: global f32[N, 64])
  domain N >= 1, D >= 32, D % 8 == 0
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 32] pad 8
  smem ys: bf16[R, 8] pad 8
  role main warps 0..4:
    reg a: bf16[R, 16] layout mma_a(4, 1)
    reg b: bf16[64, 16] layout mma_b(4, 1)
    reg acc: f32[R, 64] layout mma_acc(4, 1)
    reg v: bf16[R, 8] layout rows
    fill acc, value=0.0
    fill b, value=1.0
    cp.async xs <- x[t * R : +R, 0 : +32], oob=zero
    fixture.ld v <- x[t * R : +R, 8 : +8], oob=zero, bytes=16
    fixture.st ys <- v
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    for kk in 0 .. 2:
      ldmatrix a <- xs[:, kk * 16 : +16]
      mma.sync acc <- a, b^T
    store out[t * R : +R, :] <- acc, oob=skip
