# target: h200
# Near miss: the elected thread releases a stage only `wgmma` read; the warpgroup's asynchronous read
# is one unit's, complete for that thread once it waited for the group.
kernel pipe(x: global bf16[N, 64], c: global bf16[K, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0, K >= 1
  const S = 2, BN = 64
  grid (t) over (N / 64)
  cta warps 8 occupancy 1
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[S][BN, 64] swizzle 128B
  barrier xfull: mbarrier count 1
  barrier full: mbarrier[S] count 1
  barrier empty: mbarrier[S] count 1
  role producer warps 0..4 regs 40:
    mbarrier.arrive.expect_tx xfull, bytes=64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], xfull
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait empty[s], parity=(kt / S + 1) % 2
      mbarrier.arrive.expect_tx full[s], bytes=BN * 64 * 2
      tma.load cs[s] <- c[kt * BN : +BN, :], full[s]
  role consumer warps 4..8 regs 232:
    reg acc: f32[64, BN] layout wgmma_acc
    mbarrier.wait xfull, parity=0
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait full[s], parity=(kt / S) % 2
      wgmma acc <- xs, cs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      mbarrier.arrive empty[s], per=instance
    store out[t * 64 : +64, :] <- acc
