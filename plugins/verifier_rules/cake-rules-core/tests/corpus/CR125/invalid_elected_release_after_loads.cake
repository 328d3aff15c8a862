# target: h200
# One elected thread releases a stage that all 128 threads of the consumer read with `load`.
kernel pipe(x: global bf16[N, 64], c: global bf16[K, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0, K >= 1
  const S = 2, BN = 64
  grid (t) over (N / 64)
  cta warps 8 occupancy 1
  smem cs: bf16[S][BN, 64] align 128
  barrier full: mbarrier[S] count 1
  barrier empty: mbarrier[S] count 1
  role producer warps 0..4 regs 40:
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait empty[s], parity=(kt / S + 1) % 2
      mbarrier.arrive.expect_tx full[s], bytes=BN * 64 * 2
      tma.load cs[s] <- c[kt * BN : +BN, :], full[s]
  role consumer warps 4..8 regs 232:
    reg v: f32[BN, 64] layout rows
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait full[s], parity=(kt / S) % 2
      load v <- cs[s]
      mbarrier.arrive empty[s], per=instance  # expect-error[CR125]
    store out[t * 64 : +64, :] <- v
