# target: h200
# atomic.cake with the scatter laid out for vector reductions that share L2 sectors: each role instance
# (one warpgroup, 128 points) holds its points' cluster indices in `wgmma_rows` registers and re-reads
# its rows of x into a `wgmma_acc` layout, so the four lanes of a quad hold 8 consecutive columns of one
# row (two each) and add them with `red.global.add.v2.f32`: one 32-byte sector a quad, eight rows a
# warp instruction, where atomic.cake's `rows` tiles (one row a thread) touch 32 rows of 16 bytes each.
# No sort, no shared memory: red.shared.add.f32 is a compare-and-swap loop on sm_90.
program kmeans_update_vector(x: global T[B, N, D], assign: global i32[B, N], c: global T[B, K, D], centroids: global f32[B, K, D], counts: global i32[B, K])
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

# sums[b, assign[b, i]] += x[b, i] and counts[b, assign[b, i]] += 1 for every point i; a quad of lanes per point
kernel accumulate(x: global T[B, N, D], assign: global i32[B, N], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128, G = 2, DC = 32
  grid (t, b) over (cdiv(N, G * R), B)
  cta warps 4 * G
  role scatter warps 0..4 * G per 4:
    reg ai: i32[R] layout wgmma_rows
    reg one: i32[R] layout wgmma_rows
    reg xv: f32[R, DC] layout wgmma_acc
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
