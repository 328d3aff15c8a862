# target: h200
# Brute-force k nearest neighbours on the Hopper path, the distance matrix never in global memory. Each CTA
# owns BM queries: a producer warp streams them once and then every tile of BN points through TMA into
# two pipes; each of WG consumer warpgroups scores its BM / WG queries against a tile with one wgmma
# (fp32 accumulators), stores the scores to shared memory and folds ||x||^2 - 2 q.x into sorted per-query
# lists in registers (topk.update reads a `rows` or shared tile, not a wgmma fragment). The CTA barriers
# around the fold are the producer's too: it takes two a tile, after the tile's copy. One CTA per query
# tile: no split over the points yet (at M = 4096 only 32 CTAs run).
program knn(q: global T[B, M, D], x: global T[B, N, D], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  buffer x_sq: global f32[B, N]
  launch point_norms(x, x_sq)
  launch topk(q, x, x_sq, out)

# ||x||^2 for every point, one row per thread
kernel point_norms(x: global T[B, N, D], x_sq: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store x_sq[b, t * R : +R] <- s, oob=skip


kernel topk(q: global T[B, M, D], x: global T[B, N, D], x_sq: global f32[B, N], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  const BM = 128, BN = 64, S = 2, WG = 2
  const ROWS = BM / WG
  grid (t, b) over (cdiv(M, BM), B)
  cta warps 4 + 4 * WG occupancy 1
  smem qs: T[1][BM, D] swizzle 128B
  smem xs: T[S][BN, D] swizzle 128B
  smem sc: f32[BM, BN] pad 4
  pipe qring: producer -> main of qs
  pipe xring: producer -> main of xs
  role producer warps 0..4:
    let NC = cdiv(N, BN)
    pipe.acquire qb <- qring
    tma.load qs[qb] <- q[b, t * BM : +BM, :]
    for i in 0 .. NC:
      pipe.acquire s <- xring
      tma.load xs[s] <- x[b, i * BN : +BN, :]
      bar.sync
      bar.sync
  role main warps 4..4 + 4 * WG per 4:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg tv: f32[ROWS, K] layout rows
    reg ti: i32[ROWS, K] layout rows
    fill tv, value=inf
    fill ti, value=-1
    let NC = cdiv(N, BN)
    pipe.wait qb <- qring
    for i in 0 .. NC:
      pipe.wait s <- xring
      wgmma acc <- qs[qb][self * ROWS : +ROWS, :], xs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      store sc[self * ROWS : +ROWS, :] <- acc
      bar.sync
      topk.update tv, ti <- sc[self * ROWS : +ROWS, :], x_sq[b, i * BN : +BN], base=i * BN, k=K, scale=-2.0, oob=skip
      bar.sync
      pipe.release xring[s]
    pipe.release qring[qb]
    store out[b, t * BM + self * ROWS : +ROWS, :] <- ti, oob=skip
