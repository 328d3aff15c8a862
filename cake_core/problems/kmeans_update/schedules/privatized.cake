# target: h200
# K-Means centroid update with atomics privatized in shared memory, in three launches: zero the per-cluster
# sums and counts; each CTA sums P points' DC columns into its own shared accumulator (`atomic.add` into
# shared memory, `red.shared.add`), then adds the accumulator's rows into the global sums once (one atomic
# per (cluster, column) per CTA instead of one per (point, column)); then divide each cluster's sum by its
# count, where an empty cluster keeps its previous centroid.
# At the reference cell (B=32 N=65536 K=1024 D=128) that is 33.5M global atomics instead of 268M.
# The shared accumulator holds KP = 1024 clusters: the domain stops there (K <= 1024).
program kmeans_update_private(x: global T[B, N, D], assign: global i32[B, N], c: global T[B, K, D], centroids: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, K <= 1024, D in {64, 128, 256}
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

# CTA (t, s, b): points t*P .. t*P+P of batch b, columns s*DC .. s*DC+DC, summed in shared memory first;
# the counts are summed alike and flushed by the CTAs of the first column slice only
kernel accumulate(x: global T[B, N, D], assign: global i32[B, N], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, K <= 1024, D in {64, 128, 256}
  const R = 128, G = 4, DC = 32, P = 8192, KP = 1024
  grid (t, s, b) over (cdiv(N, P), D / DC, B)
  cta warps 4 * G
  smem acc: f32[KP, DC] pad 1
  smem cnt: i32[KP]
  role scatter warps 0..4 * G per 4:
    reg z: f32[R, DC] layout rows
    reg zc: i32[R] layout rows
    reg ai: i32[R] layout rows
    reg one: i32[R] layout rows
    reg xv: f32[R, DC] layout rows
    reg ki: i32[R] layout rows
    fill z, value=0.0
    fill zc, value=0
    for z0 in 0 .. KP / (G * R):
      store acc[(z0 * G + self) * R : +R, :] <- z
      store cnt[(z0 * G + self) * R : +R] <- zc
    bar.sync
    fill one, value=1
    for i in 0 .. P / (G * R):
      let row = t * P + (i * G + self) * R
      # points past N read the index -1, which the masked scatters skip
      load ai <- assign[b, row : +R], oob=fill, value=-1
      load xv <- x[b, row : +R, s * DC : +DC], oob=zero
      atomic.add acc[:, :] <- xv, ai, oob=skip
      atomic.add cnt[:] <- one, ai, oob=skip
    bar.sync
    # row k of the accumulator to cluster k; rows at or past K are skipped
    for f in 0 .. KP / (G * R):
      let k0 = (f * G + self) * R
      iota ki, start=k0
      load z <- acc[k0 : +R, :]
      atomic.add sums[b, :, s * DC : +DC] <- z, ki, oob=skip
      if s == 0:
        load zc <- cnt[k0 : +R]
        atomic.add counts[b, :] <- zc, ki, oob=skip

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
