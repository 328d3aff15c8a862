# target: h200
# Cluster barriers steered by the rank (only rank 0 arrives) and by the role instance (instance 1 arrives
# twice, instance 0 once).
kernel ranks(x: global bf16[B, N, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 4 cluster (C)
  role all warps 0..4:
    reg v: f32[R, 1] layout rows
    sumsq v <- x[b, t * R : +R, :], oob=zero
    if crank == 0:
      cluster.sync  # expect-error[CR134]
    store out[b, t * R : +R] <- v, oob=skip

kernel instances(x: global bf16[B, N, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (t, b) over (C * cdiv(N, C * 2 * R), B)
  cta warps 8 cluster (C)
  role all warps 0..8 per 4:
    reg v: f32[R, 1] layout rows
    let n = self + 1
    for i in 0 .. n:
      cluster.sync  # expect-error[CR134]
    sumsq v <- x[b, t * 2 * R + self * R : +R, :], oob=zero
    store out[b, t * 2 * R + self * R : +R] <- v, oob=skip
