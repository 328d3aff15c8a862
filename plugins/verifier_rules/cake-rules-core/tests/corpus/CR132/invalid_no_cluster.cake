# target: h200
# A multicast copy in a kernel without a cluster: there is no peer to copy the other half, so the rows
# the ranks of a cluster would share are never written.
kernel norms(x: global bf16[B, N, 64], c: global bf16[B, 128, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  smem cs: bf16[128, 64] align 128
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg s: f32[R, 1] layout rows
    mbarrier.arrive.expect_tx full, bytes=64 * 64 * 2
    tma.load cs[crank * 64 : +64, :] <- c[b, crank * 64 : +64, :], full, multicast  # expect-error[CR132]
    mbarrier.wait full, parity=0
    sumsq s <- cs[0 : +R, :]
    store out[b, t * R : +R] <- s, oob=skip
