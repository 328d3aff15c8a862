# target: h200
# Near misses: a cluster barrier that every role reaches once per tile of a loop every CTA of the cluster
# walks the same number of times (a persistent loop over whole pairs of tiles), and one under an `if`
# on a size, which every thread of every CTA decides alike.
kernel pairs(x: global bf16[B, N, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (w) over (C * min(SMS / C, B * cdiv(N, C * R)))
  cta warps 8 cluster (C)
  role first warps 0..4:
    reg v: f32[R, 1] layout rows
    let PT = cdiv(N, C * R)
    for item in w / C .. B * PT step min(SMS / C, B * PT):
      let b = item / PT
      let t = item % PT * C + crank
      sumsq v <- x[b, t * R : +R, :], oob=zero
      store out[b, t * R : +R] <- v, oob=skip
      cluster.sync
  role second warps 4..8:
    let PT = cdiv(N, C * R)
    for item in w / C .. B * PT step min(SMS / C, B * PT):
      cluster.sync

kernel sized(x: global bf16[B, N, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 64, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 4 cluster (C)
  role all warps 0..4:
    reg v: f32[R, 1] layout rows
    sumsq v <- x[b, t * R : +R, :], oob=zero
    if N > R:
      cluster.sync
    store out[b, t * R : +R] <- v, oob=skip
