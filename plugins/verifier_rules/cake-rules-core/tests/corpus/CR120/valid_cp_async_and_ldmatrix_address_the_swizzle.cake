# target: h200
# cp.async and ldmatrix are swizzle-aware: their lowering puts and finds each 16-byte chunk where the
# buffer's swizzle does, so they may fill and read a 128B-swizzled buffer.
kernel mma(x: global bf16[N, 64], c: global bf16[64, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[64, 64] pad 8
  role main warps 0..4:
    reg acc: f32[64, 64] layout mma_acc(2, 2)
    reg a: bf16[64, 16] layout mma_a(2, 2)
    reg bt: bf16[64, 16] layout mma_b(2, 2)
    fill acc, value=0.0
    cp.async xs <- x[t * 64 : +64, :]
    cp.async cs <- c
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    for kk in 0 .. 4:
      ldmatrix a <- xs[:, kk * 16 : +16]
      ldmatrix bt <- cs[:, kk * 16 : +16]
      mma.sync acc <- a, bt^T
    store out[t * 64 : +64, :] <- acc
