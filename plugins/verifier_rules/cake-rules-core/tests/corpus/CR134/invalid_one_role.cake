# target: h200
# A cluster barrier in the producer role only: the consumer warps never arrive, so it never completes.
kernel pairs(x: global bf16[B, N, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 8 cluster (C)
  role first warps 0..4:
    reg v: f32[R, 1] layout rows
    sumsq v <- x[b, t * R : +R, :], oob=zero
    cluster.sync  # expect-error[CR134]
    store out[b, t * R : +R] <- v, oob=skip
  role second warps 4..8:
    reg w: f32[R, 1] layout rows
    sumsq w <- x[b, t * R : +R, :], oob=zero
