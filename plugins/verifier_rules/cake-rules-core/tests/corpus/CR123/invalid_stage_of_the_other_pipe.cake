# target: h200
# The copy into `cs` names the stage of the x pipe.
kernel pipe(x: global bf16[N, 64], c: global bf16[K, 64], out: global f32[N, 64])
  domain N >= 1, N % 64 == 0, K >= 1
  const S = 4, BN = 64
  grid (t) over (N / 64)
  cta warps 8 occupancy 1
  smem xs: bf16[1][64, 64] swizzle 128B
  smem cs: bf16[S][BN, 64] swizzle 128B
  pipe xring: producer -> consumer of xs
  pipe cring: producer -> consumer of cs
  role producer warps 0..4 regs 40:
    pipe.acquire xb <- xring
    tma.load xs[xb] <- x[t * 64 : +64, :]
    for kt in 0 .. cdiv(K, BN):
      pipe.acquire s <- cring
      tma.load cs[xb] <- c[kt * BN : +BN, :]  # expect-error[CR123]
  role consumer warps 4..8 regs 232:
    reg acc: f32[64, BN] layout wgmma_acc
    pipe.wait xb <- xring
    for kt in 0 .. cdiv(K, BN):
      pipe.wait s <- cring
      wgmma acc <- xs[xb], cs[s]^T, accumulate=0  # expect-error[CR127]
      wgmma.commit
      wgmma.wait pending=0
      pipe.release cring[s]
    pipe.release xring[xb]
    store out[t * 64 : +64, :] <- acc
