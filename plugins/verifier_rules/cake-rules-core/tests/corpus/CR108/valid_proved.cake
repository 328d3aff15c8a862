# target: h200
# The near misses: a divisibility clause makes every tile whole, a guard keeps the row in range, and
# the ring is indexed modulo its own depth. Each is proved in bounds for every size in the domain.
kernel tiles(x: global f32[N, 64], c: global f32[K, 64], out: global f32[N])
  domain N >= 1, N % 128 == 0, K >= 1
  const R = 128
  grid (t) over (N / R)
  cta warps 4
  smem cs: f32[3][R]
  role all warps 0..4:
    reg s: f32[R] layout rows
    reg w: f32[1, 64] layout rows
    reg q: f32[1] layout rows
    sumsq s <- x[t * R : +R, :]
    store out[t * R : +R] <- s
    for k in 0 .. K + 4:
      if k < K:
        fixture.ld w <- c[k : +1, :]
        sumsq q <- c[k : +1, :]
      store cs[k % 3] <- s
      bar.sync
