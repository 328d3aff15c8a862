# target: h200
# A cluster of 16 CTAs is past the portable limit of 8; a cluster extent of 0 is no cluster at all; and
# clusters along a grid whose first variable is the batch need an even batch count, which B = 1 is not.
kernel wide(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (16 * cdiv(N, 16 * R))
  cta warps 4 cluster (16)  # expect-error[CR131]
  role all warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
    store out[t * R : +R] <- s, oob=skip

kernel empty(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4 cluster (0)  # expect-error[CR131]
  role all warps 0..4:
    reg s: f32[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
    store out[t * R : +R] <- s, oob=skip

kernel square(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const R = 128
  grid (b, t) over (B, 2 * cdiv(N, 2 * R))  # expect-error[CR131]
  cta warps 4 cluster (2)
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store out[b, t * R : +R] <- s, oob=skip
