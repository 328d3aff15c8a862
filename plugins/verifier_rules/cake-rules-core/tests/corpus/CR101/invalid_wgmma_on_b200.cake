# target: b200
# Warpgroup MMA is sm_90a only: sm_100a replaces it with tcgen05 (TMA and mbarriers it has). One
# error for the feature, at the first of the three operations that need it.
kernel scores(x: global bf16[N, 64], c: global bf16[64, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[64, 64] swizzle 128B
  barrier full: mbarrier count 1
  role mma warps 0..4:
    reg acc: f32[64, 64] layout wgmma_acc
    mbarrier.arrive.expect_tx full, bytes=2 * 64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], full
    tma.load cs <- c, full
    mbarrier.wait full, parity=0
    wgmma acc <- xs, cs^T, accumulate=0  # expect-error[CR101]
    wgmma.commit
    wgmma.wait pending=0
    store out[t * 64 : +64, :] <- acc
