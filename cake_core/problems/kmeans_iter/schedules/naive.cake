# target: h200
# One K-Means iteration, the naive schedule: the two steps as separate launches. The assignment is
# kmeans-assign's naive.cake (one thread per point, centroids read from global memory); the update is
# kmeans-update's atomic.cake, reading the assignments back from global memory (x is read twice).
program kmeans_iter(x: global T[B, N, D], c: global T[B, K, D], assign: global i32[B, N], centroids: global T[B, K, D])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer c_sq: global f32[B, K]
  buffer sums: global f32[B, K, D]
  buffer counts: global i32[B, K]
  launch centroid_norms(c, c_sq)
  launch zero(sums, counts)
  launch nearest(x, c, c_sq, assign)
  launch accumulate(x, assign, sums, counts)
  launch finalize(sums, counts, c, centroids)

# ||c||^2 for every centroid, one row per thread
kernel centroid_norms(c: global T[B, K, D], c_sq: global f32[B, K])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- c[b, t * R : +R, :], oob=zero
    store c_sq[b, t * R : +R] <- s, oob=skip

# sums = 0 and counts = 0, one cluster per thread
kernel zero(sums: global f32[B, K, D], counts: global i32[B, K])
  domain B >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg z: f32[R, DC] layout rows
    reg zc: i32[R] layout rows
    fill z, value=0.0
    fill zc, value=0
    store counts[b, t * R : +R] <- zc, oob=skip
    for dc in 0 .. D / DC:
      store sums[b, t * R : +R, dc * DC : +DC] <- z, oob=skip

# the nearest centroid of every point, one point per thread: argmin of ||c||^2 - 2 x.c
kernel nearest(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, K], assign: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg bv: f32[R] layout rows
    reg bi: i32[R] layout rows
    reg dot: f32[R, 1] layout rows
    fill bv, value=inf
    fill bi, value=-1
    for k in 0 .. K:
      rowdot dot <- x[b, t * R : +R, :], c[b, k, :], oob=zero
      argmin.update bv, bi <- dot, c_sq[b, k : +1], base=k, scale=-2.0
    store assign[b, t * R : +R] <- bi, oob=skip

# sums[b, assign[b, i]] += x[b, i] and counts[b, assign[b, i]] += 1, one point per thread
kernel accumulate(x: global T[B, N, D], assign: global i32[B, N], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg ai: i32[R] layout rows
    reg one: i32[R] layout rows
    reg xv: f32[R, DC] layout rows
    # points past N read the index -1, which the masked scatters skip
    load ai <- assign[b, t * R : +R], oob=fill, value=-1
    fill one, value=1
    atomic.add counts[b, :] <- one, ai, oob=skip
    for dc in 0 .. D / DC:
      load xv <- x[b, t * R : +R, dc * DC : +DC], oob=zero
      atomic.add sums[b, :, dc * DC : +DC] <- xv, ai, oob=skip

# centroids = sums / counts rounded to T where a cluster has points, else its previous centroid c
kernel finalize(sums: global f32[B, K, D], counts: global i32[B, K], c: global T[B, K, D], centroids: global T[B, K, D])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg cv: f32[R, DC] layout rows
    for dc in 0 .. D / DC:
      rowdiv cv <- sums[b, t * R : +R, dc * DC : +DC], counts[b, t * R : +R], c[b, t * R : +R, dc * DC : +DC], oob=zero
      store centroids[b, t * R : +R, dc * DC : +DC] <- cv, oob=skip
