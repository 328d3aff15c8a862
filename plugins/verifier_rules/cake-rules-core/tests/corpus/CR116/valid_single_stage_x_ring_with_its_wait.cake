# target: h200
# Near miss: a one-stage x ring beside a two-stage centroid ring; the producer waits on `xempty`
# before each refill of the x stage, so it never runs a whole x tile ahead of the consumer.
kernel pipe(x: global bf16[M, 64], c: global bf16[K, 64], out: global f32[M, 64])
  domain M >= 1, M % 64 == 0, K >= 1, K <= 64
  const S = 2, XS = 1, BN = 64
  grid (w) over (1)
  cta warps 8 occupancy 1
  smem xs: bf16[XS][64, 64] swizzle 128B
  smem cs: bf16[S][BN, 64] swizzle 128B
  barrier xfull: mbarrier[XS] count 1
  barrier xempty: mbarrier[XS] count 128
  barrier full: mbarrier[S] count 1
  barrier empty: mbarrier[S] count 128
  role producer warps 0..4 regs 40:
    for i in 0 .. M / 64:
      let xb = i % XS
      mbarrier.wait xempty[xb], parity=(i / XS + 1) % 2
      mbarrier.arrive.expect_tx xfull[xb], bytes=64 * 64 * 2
      tma.load xs[xb] <- x[i * 64 : +64, :], xfull[xb]
      for kt in 0 .. cdiv(K, BN):
        let g = i * cdiv(K, BN) + kt
        let s = g % S
        mbarrier.wait empty[s], parity=(g / S + 1) % 2
        mbarrier.arrive.expect_tx full[s], bytes=BN * 64 * 2
        tma.load cs[s] <- c[kt * BN : +BN, :], full[s]
  role consumer warps 4..8 regs 232:
    reg acc: f32[64, BN] layout wgmma_acc
    for i in 0 .. M / 64:
      let xb = i % XS
      mbarrier.wait xfull[xb], parity=(i / XS) % 2
      for kt in 0 .. cdiv(K, BN):
        let g = i * cdiv(K, BN) + kt
        let s = g % S
        mbarrier.wait full[s], parity=(g / S) % 2
        wgmma acc <- xs[xb], cs[s]^T, accumulate=0
        wgmma.commit
        wgmma.wait pending=0
        mbarrier.arrive empty[s]
      mbarrier.arrive xempty[xb]
      store out[i * 64 : +64, :] <- acc
