# target: h200
# privatized.cake with the points staged through shared memory: each CTA copies its tiles of points with
# `cp.async` (coalesced, two buffers: the next tile is in flight while the current one is scattered) and
# reads them back one row per thread, instead of each thread loading its own row's columns from global
# memory one element at a time. Rows of 68 bytes (pad 2): 4-byte copies, and the reads of one column by
# 32 threads fall in 32 different banks.
# The shared accumulator holds KP = 1024 clusters: the domain stops there (K <= 1024).
program kmeans_update_staged(x: global T[B, N, D], assign: global i32[B, N], c: global T[B, K, D], centroids: global f32[B, K, D], counts: global i32[B, K])
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
# tiles of G*R points (each role instance copies and reads its own R rows) alternate between xs0 and xs1;
# the counts are summed alike and flushed by the CTAs of the first column slice only
kernel accumulate(x: global T[B, N, D], assign: global i32[B, N], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, K <= 1024, D in {64, 128, 256}
  const R = 128, G = 4, DC = 32, P = 8192, KP = 1024, S = P / (G * R)
  grid (t, s, b) over (cdiv(N, P), D / DC, B)
  cta warps 4 * G
  smem acc: f32[KP, DC] pad 1
  smem cnt: i32[KP]
  smem xs0: T[G * R, DC] pad 2
  smem xs1: T[G * R, DC] pad 2
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
    # tile 0 of this CTA into xs0
    cp.async xs0[self * R : +R, :] <- x[b, t * P + self * R : +R, s * DC : +DC], oob=zero, bytes=4
    cp.async.commit
    for i in 0 .. S / 2:
      let r0 = t * P + (2 * i * G + self) * R
      let r1 = r0 + G * R
      # tile 2i+1 into xs1 while tile 2i (xs0) is scattered; points past N are copied as zeros
      cp.async xs1[self * R : +R, :] <- x[b, r1 : +R, s * DC : +DC], oob=zero, bytes=4
      cp.async.commit
      cp.async.wait pending=1
      bar.sync
      load ai <- assign[b, r0 : +R], oob=fill, value=-1
      load xv <- xs0[self * R : +R, :]
      atomic.add acc[:, :] <- xv, ai, oob=skip
      atomic.add cnt[:] <- one, ai, oob=skip
      bar.sync
      # tile 2i+2 into xs0 (none after the last) while tile 2i+1 (xs1) is scattered
      if i + 1 < S / 2:
        cp.async xs0[self * R : +R, :] <- x[b, r1 + G * R : +R, s * DC : +DC], oob=zero, bytes=4
      cp.async.commit
      cp.async.wait pending=1
      bar.sync
      load ai <- assign[b, r1 : +R], oob=fill, value=-1
      load xv <- xs1[self * R : +R, :]
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
