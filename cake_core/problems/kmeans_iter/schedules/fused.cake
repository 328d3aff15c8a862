# target: h200
# One K-Means iteration with x read once: the assignment is kmeans-assign's ampere.cake (each CTA keeps
# its rows of x in shared memory, streams centroid k-chunks through a cp.async ring into mma.sync and
# folds each centroid tile into a running argmin); right after its argmin the same CTA scatters those
# rows of x, still in shared memory, into the per-cluster sums with atomics. A last launch divides.
# Built on ampere.cake rather than hopper.cake: hopper.cake's x tile is 128B-swizzled (TMA and wgmma
# need it) and `load` does not read swizzled shared memory, and its argmin ends in `wgmma_rows`
# registers where `atomic.add` takes `rows` tiles; ampere.cake's x tile is padded, not swizzled, and
# its argmin.reduce ends in a `rows` tile. The sums (K*D f32, 512 KiB at K=1024, D=128) do not fit in
# shared memory, so the scatter goes to global memory (L2) without privatization.
program kmeans_iter(x: global T[B, N, D], c: global T[B, K, D], assign: global i32[B, N], centroids: global T[B, K, D])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer c_sq: global f32[B, K]
  buffer sums: global f32[B, K, D]
  buffer counts: global i32[B, K]
  launch prepare(c, c_sq, sums, counts)
  launch assign_scatter(x, c, c_sq, assign, sums, counts)
  launch finalize(sums, counts, c, centroids)

# ||c||^2 for every centroid, and its sums and count zeroed, one cluster per thread
kernel prepare(c: global T[B, K, D], c_sq: global f32[B, K], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}
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

# the nearest centroid of each of the CTA's BM points (ampere.cake), then each point's row of x added
# to its cluster's sums and 1 to its count
kernel assign_scatter(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, K], assign: global i32[B, N], sums: global f32[B, K, D], counts: global i32[B, K])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  # the fastest of ampere.cake's 48 sweep settings at the reference cell (2.39 ms against 3.58 for its
  # committed constants, bench/results/2026-12-01-h200-cost-rank-2.json): 4 warps, one point each in the scatter
  const BM = 128, BN = 128, BK = 64, S = 2, WM = 2, WN = 2, DC = 32
  const KC = D / BK
  grid (t, b) over (cdiv(N, BM), B)
  cta warps WM * WN occupancy 1
  smem xs: T[BM, D] pad 8
  smem cs: T[S][BN, BK] pad 8
  smem red: f32[2, BM, WN]
  role main warps 0..WM * WN:
    reg acc: f32[BM, BN] layout mma_acc(WM, WN)
    reg a: T[BM, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg bv: f32[BM] layout mma_rows(WM, WN)
    reg bi: i32[BM] layout mma_rows(WM, WN)
    reg rv: f32[BM] layout rows
    reg ri: i32[BM] layout rows
    reg ai: i32[BM] layout rows
    reg one: i32[BM] layout rows
    reg xv: f32[BM, DC] layout rows
    fill bv, value=inf
    fill bi, value=-1
    fill acc, value=0.0
    let NT = cdiv(K, BN) * KC
    cp.async xs <- x[b, t * BM : +BM, :], oob=zero
    for p in 0 .. S - 1:
      if p < NT:
        cp.async cs[p] <- c[b, p / KC * BN : +BN, p % KC * BK : +BK], oob=zero
      cp.async.commit
    for i in 0 .. NT:
      cp.async.wait pending=S - 2
      bar.sync
      let kc = i % KC
      for kk in 0 .. BK / 16:
        ldmatrix a <- xs[:, kc * BK + kk * 16 : +16]
        ldmatrix bt <- cs[i % S][:, kk * 16 : +16]
        mma.sync acc <- a, bt^T
      let j = i + S - 1
      if j < NT:
        cp.async cs[j % S] <- c[b, j / KC * BN : +BN, j % KC * BK : +BK], oob=zero
      cp.async.commit
      if kc == KC - 1:
        argmin.update bv, bi <- acc, c_sq[b, i / KC * BN : +BN], base=i / KC * BN, scale=-2.0, oob=skip
        fill acc, value=0.0
    argmin.reduce rv, ri <- bv, bi, red
    store assign[b, t * BM : +BM] <- ri, oob=skip
    # one barrier orders that store before the read back and every thread's cp.async of xs (complete
    # since the ring's first wait) before the scatter's reads of it
    bar.sync
    # the indices read back: a row past N reads -1, which the masked scatters skip
    load ai <- assign[b, t * BM : +BM], oob=fill, value=-1
    fill one, value=1
    atomic.add counts[b, :] <- one, ai, oob=skip
    for dc in 0 .. D / DC:
      load xv <- xs[:, dc * DC : +DC]
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
