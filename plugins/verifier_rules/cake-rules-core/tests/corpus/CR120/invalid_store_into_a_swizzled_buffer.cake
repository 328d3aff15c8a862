# target: h200
# `store` writes plain rows: a tile stored into a 128B-swizzled buffer lands where ldmatrix does not look.
kernel mma(x: global bf16[N, 64], c: global bf16[64, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[64, 64] pad 8
  smem os: f32[64, 64] swizzle 128B
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
    store os <- acc  # expect-error[CR120]
    bar.sync
    store out[t * 64 : +64, :] <- acc
