# target: h100
# The same warpgroup MMA and a cluster on sm_90a: every feature is there.
kernel scores(x: global bf16[N, 64], c: global bf16[64, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4 cluster (2, 1)
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[64, 64] swizzle 128B
  role mma warps 0..4:
    reg acc: f32[64, 64] layout wgmma_acc
    cp.async xs <- x[t * 64 : +64, :]
    cp.async cs <- c
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    fence.proxy_async
    wgmma acc <- xs, cs^T, accumulate=0
    wgmma.commit
    wgmma.wait pending=0
    store out[t * 64 : +64, :] <- acc
