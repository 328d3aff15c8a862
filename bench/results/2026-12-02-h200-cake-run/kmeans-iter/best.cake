# target: h200
# One K-Means iteration on Hopper with x read from DRAM once. The assignment is kmeans-assign's
# hopper.cake (persistent and warp-specialized: a producer warpgroup streams each CTA's rows of x and
# every centroid tile through TMA into 128B-swizzled shared memory; two consumer warpgroups multiply
# with wgmma and fold each centroid tile into a running argmin in registers). Right after its argmin a
# consumer warpgroup scatters its rows into the per-cluster sums and counts: the indices stay in the
# argmin's `wgmma_rows` registers, and the rows of x are re-read from global memory (just loaded by
# TMA, so from L2; the swizzled shared copy is not readable by `load`) into registers laid out as a
# wgmma accumulator, whose column pairs go out as `red.global.add.v2.f32`. A last launch divides.
program kmeans_iter(x: global T[B, N, D], c: global T[B, K, D], assign: global i32[B, N], centroids: global T[B, K, D])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  # rows of c_sq padded to a multiple of 4 floats: the tensor map over it needs 16-byte row strides
  buffer c_sq: global f32[B, cdiv(K, 4) * 4]
  buffer sums: global f32[B, K, D]
  buffer counts: global i32[B, K]
  # 1 for every point: read with oob=zero it is 0 past N, the count a row of a ragged last tile adds
  buffer ones: global i32[N]
  launch prepare(c, c_sq, sums, counts)
  launch mark(ones)
  launch assign_scatter(x, c, c_sq, assign, sums, counts, ones)
  launch finalize(sums, counts, c, centroids)

# ||c||^2 for every centroid, and its sums and count zeroed, one cluster per thread
kernel prepare(c: global T[B, K, D], c_sq: global f32[B, KP], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, K >= 1, KP >= K, D in {64, 128, 256}
  const R = 128, DC = 32
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    reg z: f32[R, DC] layout rows
    reg zc: i32[R] layout rows
    sumsq s <- c[b, t * R : +R, :], oob=zero
    store c_sq[b, t * R : +R] <- s, oob=skip
    fill z, value=0.0
    fill zc, value=0
    store counts[b, t * R : +R] <- zc, oob=skip
    for dc in 0 .. D / DC:
      store sums[b, t * R : +R, dc * DC : +DC] <- z, oob=skip

# ones = 1, one point per thread
kernel mark(ones: global i32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg one: i32[R] layout rows
    fill one, value=1
    store ones[t * R : +R] <- one, oob=skip

kernel assign_scatter(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, KP], assign: global i32[B, N], sums: global f32[B, K, D], counts: global i32[B, K], ones: global i32[N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, KP % 4 == 0, KP >= K, D in {64, 128, 256}
  # kmeans-assign's hopper.cake constants; DC columns of x per scatter step (DC / 4 registers a thread)
  const BM = min(256, 32768 / D), BN = 128, WG = 2, DC = 32
  const XS = min(2, 256 / D), S = max(2, 256 / D)
  const ROWS = BM / WG
  grid (w) over (min(SMS, B * cdiv(N, BM)))
  cta warps 4 + 4 * WG occupancy 1
  smem xs: T[XS][BM, D] swizzle 128B
  smem cs: T[S][BN, D] swizzle 128B
  smem csq: f32[S][BN]
  pipe xring: producer -> consumers of xs
  pipe cring: producer -> consumers of cs, csq
  role producer warps 0..4 regs 40:
    let TILES = B * cdiv(N, BM)
    let G = min(SMS, TILES)
    let NC = cdiv(K, BN)
    for tile in w .. TILES step G:
      let b = tile / cdiv(N, BM)
      let t = tile % cdiv(N, BM)
      pipe.acquire xb <- xring
      tma.load xs[xb] <- x[b, t * BM : +BM, :]
      for kt in 0 .. NC:
        pipe.acquire s <- cring
        tma.load cs[s] <- c[b, kt * BN : +BN, :]
        tma.load csq[s] <- c_sq[b, kt * BN : +BN]
  role consumers warps 4..4 + 4 * WG per 4 regs 232:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg bv: f32[ROWS] layout wgmma_rows
    reg bi: i32[ROWS] layout wgmma_rows
    reg one: i32[ROWS] layout wgmma_rows
    reg xv: f32[ROWS, DC] layout wgmma_acc
    let TILES = B * cdiv(N, BM)
    let G = min(SMS, TILES)
    let NC = cdiv(K, BN)
    for tile in w .. TILES step G:
      let b = tile / cdiv(N, BM)
      let t = tile % cdiv(N, BM)
      let row = t * BM + self * ROWS
      fill bv, value=inf
      fill bi, value=-1
      pipe.wait xb <- xring
      for kt in 0 .. NC:
        pipe.wait s <- cring
        wgmma acc <- xs[xb][self * ROWS : +ROWS, :], cs[s]^T, accumulate=0
        wgmma.commit
        wgmma.wait pending=0
        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K
        pipe.release cring[s]
      pipe.release xring[xb]
      argmin.reduce bv, bi <- bv, bi
      store assign[b, row : +ROWS] <- bi, oob=skip
      # a row past N (zeros from TMA) still has a nearest centroid: it adds zeros and a count of 0
      load one <- ones[row : +ROWS], oob=zero
      atomic.add counts[b, :] <- one, bi, oob=skip
      for dc in 0 .. D / DC:
        load xv <- x[b, row : +ROWS, dc * DC : +DC], oob=zero
        atomic.add sums[b, :, dc * DC : +DC] <- xv, bi, oob=skip

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
