# target: h100
# The same warpgroup MMA and a cluster on sm_90a: every feature is there (TMA into 128B-swizzled
# tiles, an mbarrier with its transaction bytes, wgmma from shared memory). N is a multiple of two
# tiles, so the grid is a whole number of clusters (CR131).
kernel scores(x: global bf16[N, 64], c: global bf16[64, 64], out: global f32[N, 64])
  domain N >= 1, N % 128 == 0
  grid (t) over (N / 64)
  cta warps 4 cluster (2, 1)
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[64, 64] swizzle 128B
  barrier full: mbarrier count 1
  role mma warps 0..4:
    reg acc: f32[64, 64] layout wgmma_acc
    mbarrier.arrive.expect_tx full, bytes=2 * 64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], full
    tma.load cs <- c, full
    mbarrier.wait full, parity=0
    wgmma acc <- xs, cs^T, accumulate=0
    wgmma.commit
    wgmma.wait pending=0
    store out[t * 64 : +64, :] <- acc
