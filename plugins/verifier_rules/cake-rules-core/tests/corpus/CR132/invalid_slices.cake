# target: h200
# Two ways to split a multicast tile wrongly between the two ranks of a cluster: quarters (rows 64..127
# are copied by no rank, in no CTA) and overlapping halves (both ranks write rows 32..63).
kernel quarters(x: global bf16[B, N, 64], c: global bf16[B, 128, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 4 cluster (C)
  smem cs: bf16[128, 64] align 128
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg s: f32[R, 1] layout rows
    mbarrier.arrive.expect_tx full, bytes=C * 32 * 64 * 2
    tma.load cs[crank * 32 : +32, :] <- c[b, crank * 32 : +32, :], full, multicast  # expect-error[CR132]
    mbarrier.wait full, parity=0
    sumsq s <- cs[0 : +R, :]
    store out[b, t * R : +R] <- s, oob=skip

kernel overlapping(x: global bf16[B, N, 64], c: global bf16[B, 128, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 4 cluster (C)
  smem cs: bf16[128, 64] align 128
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg s: f32[R, 1] layout rows
    mbarrier.arrive.expect_tx full, bytes=C * 64 * 64 * 2
    tma.load cs[crank * 32 : +64, :] <- c[b, crank * 32 : +64, :], full, multicast  # expect-error[CR132]
    mbarrier.wait full, parity=0
    sumsq s <- cs[0 : +R, :]
    store out[b, t * R : +R] <- s, oob=skip
