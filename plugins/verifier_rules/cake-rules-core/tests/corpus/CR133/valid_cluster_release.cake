# target: h200
# Near misses: a ring of centroid tiles that the two ranks of a cluster fill by multicast, half each, and
# that is handed back in every CTA — by hand (the consumers arrive on `cempty[s]` of both CTAs, and its
# count is both CTAs' consumer threads), and as a cluster pipe (the compiler derives the same).
kernel explicit(x: global bf16[B, N, 64], c: global bf16[B, K, 64], out: global f32[B, N])
  domain B >= 1, N >= 1, K >= 1
  const R = 64, BN = 128, S = 2, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 8 cluster (C)
  smem cs: bf16[S][BN, 64] align 128
  barrier cfull: mbarrier[S] count 1
  barrier cempty: mbarrier[S] count C * 128
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

kernel piped(x: global bf16[B, N, 64], c: global bf16[B, K, 64], out: global f32[B, N])
  domain B >= 1, N >= 1, K >= 1
  const R = 64, BN = 128, S = 2, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 8 cluster (C)
  smem cs: bf16[S][BN, 64] align 128
  pipe cring: producer -> consumer of cs cluster
  role producer warps 0..4:
    for kt in 0 .. cdiv(K, BN):
      pipe.acquire s <- cring
      tma.load cs[s][crank * (BN / C) : +BN / C, :] <- c[b, kt * BN + crank * (BN / C) : +BN / C, :], multicast
  role consumer warps 4..8:
    reg v: f32[R, 1] layout rows
    for kt in 0 .. cdiv(K, BN):
      pipe.wait s <- cring
      sumsq v <- cs[s][0 : +R, :]
      pipe.release cring[s]
    store out[b, t * R : +R] <- v, oob=skip
