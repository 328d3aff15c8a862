# target: h200
# K-Means centroid update by a sorted segmented reduction, the sort written out as a counting sort by
# cluster: zero the sums, counts and sorted copies; count each cluster's points (histogram); turn the
# counts into each cluster's first slot (exclusive scan); give every point its slot with
# `atomic.fetch_add` on those first slots and scatter its cluster and its row there (an `atomic.add` onto
# zeros, exact: each slot receives one point); sum each run of equal clusters of the sorted copy once
# (`segment.add`); divide. The scan has no primitive yet: it adds count j to every cluster k > j, K^2
# shared-memory atomics per batch, so the domain stops at K <= 1024. The sorted copy of x is fp32.
program kmeans_update_sorted(x: global T[B, N, D], assign: global i32[B, N], c: global T[B, K, D], centroids: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, K <= 1024, D in {64, 128, 256}
  buffer sums: global f32[B, K, D]
  buffer first: global i32[B, K]
  buffer keys: global i32[B, N]
  buffer xs: global f32[B, N, D]
  launch zero(sums, counts)
  launch zero_sorted(keys, xs)
  launch histogram(assign, counts)
  launch scan(counts, first)
  launch scatter(x, assign, first, keys, xs)
  launch segments(keys, xs, sums)
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

# keys = 0 and xs = 0, one point per thread: the scatter adds each slot's one value onto zero
kernel zero_sorted(keys: global i32[B, N], xs: global f32[B, N, D])
  domain B >= 1, N >= 1, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg z: f32[R, DC] layout rows
    reg zk: i32[R] layout rows
    fill z, value=0.0
    fill zk, value=0
    store keys[b, t * R : +R] <- zk, oob=skip
    for dc in 0 .. D / DC:
      store xs[b, t * R : +R, dc * DC : +DC] <- z, oob=skip

# counts[b, assign[b, i]] += 1 for every point i
kernel histogram(assign: global i32[B, N], counts: global i32[B, K])
  domain B >= 1, N >= 1, K >= 1
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg ai: i32[R] layout rows
    reg one: i32[R] layout rows
    load ai <- assign[b, t * R : +R], oob=fill, value=-1
    fill one, value=1
    atomic.add counts[b, :] <- one, ai, oob=skip

# first[b, k] = sum of counts[b, j] over j < k: count j added to the slot j + d for every shift d, in shared
# memory, by one CTA per batch
kernel scan(counts: global i32[B, K], first: global i32[B, K])
  domain B >= 1, K >= 1, K <= 1024
  const R = 128, KP = 1024
  grid (b) over (B)
  cta warps 4
  smem cnt: i32[KP]
  smem acc: i32[KP]
  role all warps 0..4:
    reg v: i32[R] layout rows
    reg z: i32[R] layout rows
    reg ki: i32[R] layout rows
    fill z, value=0
    for j in 0 .. KP / R:
      load v <- counts[b, j * R : +R], oob=zero
      store cnt[j * R : +R] <- v
      store acc[j * R : +R] <- z
    bar.sync
    for d in 1 .. K:
      for jc in 0 .. cdiv(K, R):
        load v <- cnt[jc * R : +R]
        iota ki, start=jc * R + d
        atomic.add acc[:] <- v, ki, oob=skip
    bar.sync
    for jo in 0 .. cdiv(K, R):
      load v <- acc[jo * R : +R]
      store first[b, jo * R : +R] <- v, oob=skip

# every point's slot in the sorted order: first[cluster] taken and moved on by one (atomic.fetch_add);
# its cluster and its row are added there onto zeros
kernel scatter(x: global T[B, N, D], assign: global i32[B, N], first: global i32[B, K], keys: global i32[B, N], xs: global f32[B, N, D])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg ai: i32[R] layout rows
    reg one: i32[R] layout rows
    reg slot: i32[R] layout rows
    reg xv: f32[R, DC] layout rows
    load ai <- assign[b, t * R : +R], oob=fill, value=-1
    fill one, value=1
    # points past N (index -1) get no slot (-1), which the scatters skip
    atomic.fetch_add slot, first[b, :] <- one, ai, oob=skip
    atomic.add keys[b, :] <- ai, slot, oob=skip
    for dc in 0 .. D / DC:
      load xv <- x[b, t * R : +R, dc * DC : +DC], oob=zero
      atomic.add xs[b, :, dc * DC : +DC] <- xv, slot, oob=skip

# sums[b, k] += each run of cluster k in the sorted copy, summed first (one atomic per run and warp)
kernel segments(keys: global i32[B, N], xs: global f32[B, N, D], sums: global f32[B, K, D])
  domain B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg ks: i32[R] layout rows
    reg xv: f32[R, DC] layout rows
    load ks <- keys[b, t * R : +R], oob=fill, value=-1
    for dc in 0 .. D / DC:
      load xv <- xs[b, t * R : +R, dc * DC : +DC], oob=zero
      segment.add sums[b, :, dc * DC : +DC] <- xv, ks, oob=skip

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
