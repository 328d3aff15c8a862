# target: h200
# The consumer's four warps 2..5 issue wgmma, but they are halves of two warpgroups.
kernel scores(x: global bf16[N, 64], c: global bf16[64, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 8
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[64, 64] swizzle 128B
  barrier full: mbarrier count 1
  role producer warps 0..2:
    mbarrier.arrive.expect_tx full, bytes=2 * 64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], full
    tma.load cs <- c, full
  role consumer warps 2..6:  # expect-error[CR109]
    reg acc: f32[64, 64] layout wgmma_acc
    mbarrier.wait full, parity=0
    wgmma acc <- xs, cs^T, accumulate=0
    wgmma.commit
    wgmma.wait pending=0
    store out[t * 64 : +64, :] <- acc
  role idle warps 6..8:
    reg z: f32[64] layout rows
    fill z, value=0.0
