# target: h200
# knn-ip (the K largest inner products) on the Hopper path: hopper.cake with the score -q.x. A producer warp
# streams each CTA's queries and every tile of points through TMA; each consumer warpgroup scores its
# queries against a tile with one wgmma, stores the products to shared memory and folds them, negated,
# into sorted per-query lists in registers. topk.update takes a bias operand: here a zero row written by
# `zero_bias` (4 bytes a point, read once per tile).
program knn(q: global T[B, M, D], x: global T[B, N, D], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  buffer zb: global f32[B, N]
  launch zero_bias(zb)
  launch topk(q, x, zb, out)

# the bias every score gets: zero (the inner product has no norm term)
kernel zero_bias(zb: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg z: f32[R, 1] layout rows
    fill z, value=0.0
    store zb[b, t * R : +R] <- z, oob=skip


kernel topk(q: global T[B, M, D], x: global T[B, N, D], zb: global f32[B, N], out: global i32[B, M, K])
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
      topk.update tv, ti <- sc[self * ROWS : +ROWS, :], zb[b, i * BN : +BN], base=i * BN, k=K, scale=-1.0, oob=skip
      bar.sync
      pipe.release xring[s]
    pipe.release qring[qb]
    store out[b, t * BM + self * ROWS : +ROWS, :] <- ti, oob=skip
