# target: h200
# knn-ip (the K largest inner products) on the Hopper path, split over the points: knn's hopper_split.cake
# with the score -q.x. Each of SP = 4 CTAs per query tile scores a quarter of the point tiles (TMA +
# wgmma, the accumulator folded from registers into per-thread lists, `wgmma_rows`), the four lists of a
# row merge by shuffles, and `merge` keeps the K best of the SP partial lists of every query. topk.update
# takes a bias row: here zeros written by `zero_bias` (4 bytes a point, streamed with the points by TMA).
program knn(q: global T[B, M, D], x: global T[B, N, D], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16}
  # rows of zb padded to a multiple of 4 floats: the tensor map over it needs 16-byte row strides
  buffer zb: global f32[B, cdiv(N, 4) * 4]
  buffer out_v: global f32[B, M, 4, K]
  buffer out_i: global i32[B, M, 4, K]
  launch zero_bias(zb)
  launch topk(q, x, zb, out_v, out_i)
  launch merge(out_v, out_i, out)

# the bias every score gets: zero (the inner product has no norm term)
kernel zero_bias(zb: global f32[B, NP])
  domain B >= 1, NP >= 1
  const R = 128
  grid (t, b) over (cdiv(NP, R), B)
  cta warps 4
  role all warps 0..4:
    reg z: f32[R, 1] layout rows
    fill z, value=0.0
    store zb[b, t * R : +R] <- z, oob=skip

kernel topk(q: global T[B, M, D], x: global T[B, N, D], zb: global f32[B, NP], out_v: global f32[B, M, 4, K], out_i: global i32[B, M, 4, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, NP % 4 == 0, NP >= N, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16}
  # 128-point tiles, a ring as deep as 192 KiB of shared memory holds (8 stages at D=64, 2 at D=256)
  const BM = 128, BN = 128, S = max(2, 512 / D), WG = 2
  const ROWS = BM / WG
  const SP = 4
  grid (t, b, sp) over (cdiv(M, BM), B, SP)
  cta warps 4 + 4 * WG occupancy 1
  smem qs: T[1][BM, D] swizzle 128B
  smem xs: T[S][BN, D] swizzle 128B
  smem zs: f32[S][BN]
  smem red: f32[BM, 2 * K] pad 4
  pipe qring: producer -> main of qs
  pipe xring: producer -> main of xs, zs
  role producer warps 0..4 regs 40:
    let NC = cdiv(N, BN)
    pipe.acquire qb <- qring
    tma.load qs[qb] <- q[b, t * BM : +BM, :]
    for i in sp * cdiv(NC, SP) .. min(NC, (sp + 1) * cdiv(NC, SP)):
      pipe.acquire s <- xring
      tma.load xs[s] <- x[b, i * BN : +BN, :]
      tma.load zs[s] <- zb[b, i * BN : +BN]
  role main warps 4..4 + 4 * WG per 4 regs 232:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg tv: f32[ROWS, K] layout wgmma_rows
    reg ti: i32[ROWS, K] layout wgmma_rows
    reg fv: f32[ROWS, K] layout rows
    reg fi: i32[ROWS, K] layout rows
    fill tv, value=inf
    fill ti, value=-1
    let NC = cdiv(N, BN)
    pipe.wait qb <- qring
    for i in sp * cdiv(NC, SP) .. min(NC, (sp + 1) * cdiv(NC, SP)):
      pipe.wait s <- xring
      wgmma acc <- qs[qb][self * ROWS : +ROWS, :], xs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      topk.update tv, ti <- acc, zs[s], base=i * BN, k=K, scale=-1.0, limit=N
      pipe.release xring[s]
    pipe.release qring[qb]
    topk.reduce fv, fi <- tv, ti, red[self * ROWS : +ROWS, :], k=K
    store out_v[b, t * BM + self * ROWS : +ROWS, sp, :] <- fv, oob=skip
    store out_i[b, t * BM + self * ROWS : +ROWS, sp, :] <- fi, oob=skip

kernel merge(part_v: global f32[B, M, 4, K], part_i: global i32[B, M, 4, K], out: global i32[B, M, K])
  domain B >= 1, M >= 1, K in {1, 2, 4, 8, 10, 16}
  const R = 128
  grid (t, b) over (cdiv(M, R), B)
  cta warps 4
  smem red: f32[R, 2 * K] pad 4
  role all warps 0..4:
    reg v: f32[R * 4, K] layout rows
    reg i: i32[R * 4, K] layout rows
    reg fv: f32[R, K] layout rows
    reg fi: i32[R, K] layout rows
    load v <- part_v[b, t * R : +R, :, :], oob=fill, value=inf
    load i <- part_i[b, t * R : +R, :, :], oob=fill, value=-1
    topk.reduce fv, fi <- v, i, red, k=K
    store out[b, t * R : +R, :] <- fi, oob=skip
