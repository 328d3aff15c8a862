# target: h200
# Two consumer warpgroups each arrive once (`per=instance`, count WG) after `argmin.update` read the
# stage's norms with all 128 threads: the producer may refill `csq` while 127 threads still read it.
kernel assign(x: global bf16[N, 64], c: global bf16[K, 64], c_sq: global f32[KP], out: global i32[N])
  domain N >= 1, K >= 1, KP % 4 == 0, KP >= K
  const BM = 256, BN = 128, WG = 2, S = 2
  const ROWS = BM / WG
  grid (t) over (cdiv(N, BM))
  cta warps 4 + 4 * WG occupancy 1
  smem xs: bf16[BM, 64] swizzle 128B
  smem cs: bf16[S][BN, 64] swizzle 128B
  smem csq: f32[S][BN]
  barrier xfull: mbarrier count 1
  barrier cfull: mbarrier[S] count 1
  barrier cempty: mbarrier[S] count WG
  role producer warps 0..4 regs 40:
    mbarrier.arrive.expect_tx xfull, bytes=BM * 64 * 2
    tma.load xs <- x[t * BM : +BM, :], xfull
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait cempty[s], parity=(kt / S + 1) % 2
      mbarrier.arrive.expect_tx cfull[s], bytes=BN * 64 * 2 + BN * 4
      tma.load cs[s] <- c[kt * BN : +BN, :], cfull[s]
      tma.load csq[s] <- c_sq[kt * BN : +BN], cfull[s]
  role consumers warps 4..4 + 4 * WG per 4 regs 232:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg bv: f32[ROWS] layout wgmma_rows
    reg bi: i32[ROWS] layout wgmma_rows
    fill bv, value=inf
    fill bi, value=-1
    mbarrier.wait xfull, parity=0
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait cfull[s], parity=(kt / S) % 2
      wgmma acc <- xs[self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
      mbarrier.arrive cempty[s], per=instance  # expect-error[CR125]
    argmin.reduce bv, bi <- bv, bi
    store out[t * BM + self * ROWS : +ROWS] <- bi, oob=skip
