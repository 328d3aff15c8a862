# target: h200
# K-Means centroid update with atomics, in three launches: zero the per-cluster sums and counts;
# scatter every CTA's points into them with `atomic.add` (two role instances per CTA, 128 points each:
# their atomics on the same clusters do not race, and CTAs are unordered anyway); then divide each
# cluster's sum by its count, where an empty cluster keeps its previous centroid.
# `load`, `atomic.add` (`red.global.add`, four columns at a time from sm_90) and `rowdiv` are lowered for every target.
program kmeans_update(x: global T[B, N, D], assign: global i32[B, N], c: global T[B, K, D], centroids: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer sums: global f32[B, K, D]
  launch zero(sums, counts)
  launch accumulate(x, assign, sums, counts)
  launch finalize(sums, counts, c, centroids)

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

# sums[b, assign[b, i]] += x[b, i] and counts[b, assign[b, i]] += 1 for every point i, one point per thread
kernel accumulate(x: global T[B, N, D], assign: global i32[B, N], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, G = 2, DC = 32
  grid (t, b) over (cdiv(N, G * R), B)
  cta warps 4 * G
  role scatter warps 0..4 * G per 4:
    reg ai: i32[R] layout rows
    reg one: i32[R] layout rows
    reg xv: f32[R, DC] layout rows
    let row = t * G * R + self * R
    # points past N read the index -1, which the masked scatters skip
    load ai <- assign[b, row : +R], oob=fill, value=-1
    fill one, value=1
    atomic.add counts[b, :] <- one, ai, oob=skip
    for dc in 0 .. D / DC:
      load xv <- x[b, row : +R, dc * DC : +DC], oob=zero
      atomic.add sums[b, :, dc * DC : +DC] <- xv, ai, oob=skip

# centroids = sums / counts where a cluster has points, else its previous centroid c
kernel finalize(sums: global f32[B, K, D], counts: global i32[B, K], c: global T[B, K, D], centroids: global f32[B, K, D])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg cv: f32[R, DC] layout rows
    for dc in 0 .. D / DC:
      rowdiv cv <- sums[b, t * R : +R, dc * DC : +DC], counts[b, t * R : +R], c[b, t * R : +R, dc * DC : +DC], oob=zero
      store centroids[b, t * R : +R, dc * DC : +DC] <- cv, oob=skip
