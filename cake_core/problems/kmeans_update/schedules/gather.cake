# target: h200
# K-Means centroid update by a counting sort of point INDICES and row gathers: zero the sums and counts;
# count each cluster's points (histogram, which also zeroes the sorted order); give each cluster a run of
# slots with one `atomic.fetch_add` of its count onto a per-batch cursor (runs are disjoint and cover
# 0 .. N, in whatever order the clusters take them: a segmented sum needs each cluster's points together,
# not the clusters in order, so there is no scan and no bound on K); give every point its slot
# (`atomic.fetch_add` on its cluster's run) and add its index there onto zeros (exact: one value per
# slot); then walk the sorted order, 128 slots a warp: gather each slot's cluster (`gather`) and sum the
# points' rows of x, gathered, in fp32 registers run by run (`segment.gather_add`: x read once, in
# cluster order, no sorted copy of it; one vector reduction per lane and run, so a big cluster is shared
# by many warps, each adding its part once); divide.
program kmeans_update_gather(x: global T[B, N, D], assign: global i32[B, N], c: global T[B, K, D], centroids: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer sums: global f32[B, K, D]
  buffer cursor: global i32[B, 1]
  buffer first: global i32[B, K]
  buffer order: global i32[B, N]
  launch zero(sums, counts)
  launch histogram(assign, counts, order, cursor)
  launch runs(counts, cursor, first)
  launch scatter(assign, first, order)
  launch segments(x, assign, order, sums)
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

# counts[b, assign[b, i]] += 1 for every point i; and order = 0 (the scatter adds each slot's one index
# onto zero) and the cursors = 0, one slot per thread
kernel histogram(assign: global i32[B, N], counts: global i32[B, K], order: global i32[B, N], cursor: global i32[B, 1])
  domain B >= 1, N >= 1, K >= 1
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg ai: i32[R] layout rows
    reg one: i32[R] layout rows
    reg z: i32[R] layout rows
    reg z1: i32[1] layout rows
    load ai <- assign[b, t * R : +R], oob=fill, value=-1
    fill one, value=1
    atomic.add counts[b, :] <- one, ai, oob=skip
    fill z, value=0
    store order[b, t * R : +R] <- z, oob=skip
    if t == 0:
      fill z1, value=0
      store cursor[b, 0 : +1] <- z1

# first[b, k]: the first slot of cluster k's run, its count taken from the batch's cursor
kernel runs(counts: global i32[B, K], cursor: global i32[B, 1], first: global i32[B, K])
  domain B >= 1, K >= 1
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg n: i32[R] layout rows
    reg z: i32[R] layout rows
    reg f: i32[R] layout rows
    load n <- counts[b, t * R : +R], oob=zero
    fill z, value=0
    # clusters past K count 0: they take the cursor's value and move it on by nothing
    atomic.fetch_add f, cursor[b, :] <- n, z
    store first[b, t * R : +R] <- f, oob=skip

# every point's slot in its cluster's run (first[cluster] taken and moved on by one); its index is added
# there onto zero
kernel scatter(assign: global i32[B, N], first: global i32[B, K], order: global i32[B, N])
  domain B >= 1, N >= 1, K >= 1
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg ai: i32[R] layout rows
    reg one: i32[R] layout rows
    reg slot: i32[R] layout rows
    reg pi: i32[R] layout rows
    load ai <- assign[b, t * R : +R], oob=fill, value=-1
    fill one, value=1
    # points past N (index -1) get no slot (-1), which the scatter skips
    atomic.fetch_add slot, first[b, :] <- one, ai, oob=skip
    iota pi, start=t * R
    atomic.add order[b, :] <- pi, slot, oob=skip

# sums[b, k] += the rows of cluster k's points, 128 slots of the sorted order a warp: each slot's point and
# cluster, then the points' rows gathered from x (the warp's lanes across a row) and summed in fp32
# registers while the cluster stays the same; one vector reduction per lane where it changes
kernel segments(x: global T[B, N, D], assign: global i32[B, N], order: global i32[B, N], sums: global f32[B, K, D])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, W = 4
  grid (t, b) over (cdiv(N, W * R), B)
  cta warps W
  role walk warps 0..W per 1:
    reg pi: i32[R] layout rows
    reg ks: i32[R] layout rows
    let slot = t * W * R + self * R
    # slots past N read the point -1, whose cluster (-1) the gather and whose row the sum skip
    load pi <- order[b, slot : +R], oob=fill, value=-1
    gather ks <- assign[b, :], pi, value=-1
    segment.gather_add sums[b, :, :] <- x[b, :, :], pi, ks, oob=skip

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
