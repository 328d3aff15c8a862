# target: h200
# A pipe whose stages the ranks fill by multicast, but not a cluster pipe: `pipe.release` frees the
# stage in its own CTA only.
kernel piped(x: global bf16[B, N, 64], c: global bf16[B, K, 64], out: global f32[B, N])
  domain B >= 1, N >= 1, K >= 1
  const R = 64, BN = 128, S = 2, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 8 cluster (C)
  smem cs: bf16[S][BN, 64] align 128
  pipe cring: producer -> consumer of cs  # expect-error[CR133]
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
