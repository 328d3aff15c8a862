# target: h200
# The consumers arrive on `cempty[s]` in every CTA, but its count is one CTA's consumer threads: the
# phase completes as soon as the first CTA's consumers are done, and the peer's multicast overwrites a
# stage the other CTA still reads. (CR111 counts the arrivals that overshoot the count.)
kernel explicit(x: global bf16[B, N, 64], c: global bf16[B, K, 64], out: global f32[B, N])
  domain B >= 1, N >= 1, K >= 1
  const R = 64, BN = 128, S = 2, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 8 cluster (C)
  smem cs: bf16[S][BN, 64] align 128
  barrier cfull: mbarrier[S] count 1
  barrier cempty: mbarrier[S] count 128  # expect-error[CR133] expect-error[CR111]
  role producer warps 0..4:
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait cempty[s], parity=(kt / S + 1) % 2
      mbarrier.arrive.expect_tx cfull[s], bytes=BN * 64 * 2
      tma.load cs[s][crank * (BN / C) : +BN / C, :] <- c[b, kt * BN + crank * (BN / C) : +BN / C, :], cfull[s], multicast
  role consumer warps 4..8:
    reg v: f32[R, 1] layout rows
    for kt in 0 .. cdiv(K, BN):
      let s = kt % S
      mbarrier.wait cfull[s], parity=(kt / S) % 2
      sumsq v <- cs[s][0 : +R, :]
      mbarrier.arrive cempty[s], cluster
    store out[b, t * R : +R] <- v, oob=skip
