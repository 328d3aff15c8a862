# target: h200
# Near miss: the wgmma operands are 128B-swizzled and filled by TMA; the buffer ldmatrix reads is
# plain, padded rows filled by cp.async (both roles meet at one CTA barrier).
kernel mixed(x: global bf16[N, 64], c: global bf16[64, 64], out: global f32[N, 64], out2: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 8
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[64, 64] swizzle 128B
  smem xp: bf16[64, 64] pad 8
  smem cp: bf16[64, 64] pad 8
  barrier full: mbarrier count 1
  role tensor warps 0..4:
    reg acc: f32[64, 64] layout wgmma_acc
    mbarrier.arrive.expect_tx full, bytes=2 * 64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], full
    tma.load cs <- c, full
    mbarrier.wait full, parity=0
    wgmma acc <- xs, cs^T, accumulate=0
    wgmma.commit
    wgmma.wait pending=0
    store out[t * 64 : +64, :] <- acc
    bar.sync
  role warps_mma warps 4..8:
    reg acc2: f32[64, 64] layout mma_acc(2, 2)
    reg a: bf16[64, 16] layout mma_a(2, 2)
    reg bt: bf16[64, 16] layout mma_b(2, 2)
    fill acc2, value=0.0
    cp.async xp <- x[t * 64 : +64, :]
    cp.async cp <- c
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    for kk in 0 .. 4:
      ldmatrix a <- xp[:, kk * 16 : +16]
      ldmatrix bt <- cp[:, kk * 16 : +16]
      mma.sync acc2 <- a, bt^T
    store out2[t * 64 : +64, :] <- acc2
