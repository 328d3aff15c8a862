# target: h200
# An argmin over centroid tiles loaded with TMA: where K is not a multiple of BN the rows past K are
# zero-filled, become columns of `acc`, and score `csq + scale * 0` = 0: a centroid that does not exist wins.
kernel assign(x: global bf16[N, 64], c: global bf16[K, 64], c_sq: global f32[KP], out: global i32[N])
  domain N >= 1, N % 64 == 0, K >= 1, KP % 4 == 0, KP >= K
  const S = 2, BN = 64
  grid (t) over (N / 64)
  cta warps 8 occupancy 1
  smem xs: bf16[64, 64] swizzle 128B
  smem cs: bf16[S][BN, 64] swizzle 128B
  smem csq: f32[S][BN]
  barrier xfull: mbarrier count 1
  barrier full: mbarrier[S] count 1
  barrier empty: mbarrier[S] count 128
  role producer warps 0..4 regs 40:
    mbarrier.arrive.expect_tx xfull, bytes=64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], xfull
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait empty[s], parity=(kt / S + 1) % 2
      mbarrier.arrive.expect_tx full[s], bytes=BN * 64 * 2 + BN * 4
      tma.load cs[s] <- c[kt * BN : +BN, :], full[s]
      tma.load csq[s] <- c_sq[kt * BN : +BN], full[s]
  role consumer warps 4..8 regs 232:
    reg acc: f32[64, BN] layout wgmma_acc
    reg bv: f32[64] layout wgmma_rows
    reg bi: i32[64] layout wgmma_rows
    fill bv, value=inf
    fill bi, value=-1
    mbarrier.wait xfull, parity=0
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait full[s], parity=(kt / S) % 2
      wgmma acc <- xs, cs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0  # expect-error[CR128]
      mbarrier.arrive empty[s]
    store out[t * 64 : +64] <- bi
