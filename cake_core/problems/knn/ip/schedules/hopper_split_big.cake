# target: h200
# knn-ip (the K largest inner products) for long lists (K of 64, 100 and 128) on the Hopper path, split
# over the points: knn's hopper_split_big.cake with the score -q.x. Each of SP = 4 CTAs per query tile
# scores a quarter of the 64-point tiles (TMA + wgmma) and folds the accumulator from registers into one
# sorted shared list per query (a row's least score tested against its list's K-th value first; the
# four threads sharing a row insert one quad lane at a time); `merge` keeps the K best of the SP sorted
# lists of every query. topk.update takes a bias row: here zeros written by `zero_bias`.
program knn(q: global T[B, M, D], x: global T[B, N, D], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {64, 100, 128}
  # rows of zb padded to a multiple of 4 floats: the tensor map over it needs 16-byte row strides
  buffer zb: global f32[B, cdiv(N, 4) * 4]
  buffer out_v: global f32[B, 4, M, K]
  buffer out_i: global i32[B, 4, M, K]
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

kernel topk(q: global T[B, M, D], x: global T[B, N, D], zb: global f32[B, NP], out_v: global f32[B, 4, M, K], out_i: global i32[B, 4, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, NP % 4 == 0, NP >= N, D in {64, 128, 256}, K in {64, 100, 128}
  # 64-point tiles three stages deep, next to lists of 8 * (K + 1) bytes a query: at most 212 KiB at K=128
  const WG = 2 - D / 256
  const BM = 64 * WG, BN = 64, S = 3
  const ROWS = 64
  const SP = 4
  grid (t, b, sp) over (cdiv(M, BM), B, SP)
  cta warps 4 + 4 * WG occupancy 1
  smem qs: T[1][BM, D] swizzle 128B
  smem xs: T[S][BN, D] swizzle 128B
  smem zs: f32[S][BN]
  smem lv: f32[BM, K] pad 1
  smem li: i32[BM, K] pad 1
  pipe qring: producer -> main of qs
  pipe xring: producer -> main of xs, zs
  role producer warps 0..4 regs 40:
    let NC = cdiv(N, BN)
    bar.sync
    pipe.acquire qb <- qring
    tma.load qs[qb] <- q[b, t * BM : +BM, :]
    for i in sp * cdiv(NC, SP) .. min(NC, (sp + 1) * cdiv(NC, SP)):
      pipe.acquire s <- xring
      tma.load xs[s] <- x[b, i * BN : +BN, :]
      tma.load zs[s] <- zb[b, i * BN : +BN]
    bar.sync
  role main warps 4..4 + 4 * WG per 4 regs 232:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    topk.init lv[self * ROWS : +ROWS, :], li[self * ROWS : +ROWS, :] <-
    bar.sync
    let NC = cdiv(N, BN)
    pipe.wait qb <- qring
    for i in sp * cdiv(NC, SP) .. min(NC, (sp + 1) * cdiv(NC, SP)):
      pipe.wait s <- xring
      wgmma acc <- qs[qb][self * ROWS : +ROWS, :], xs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      topk.update lv[self * ROWS : +ROWS, :], li[self * ROWS : +ROWS, :] <- acc, zs[s], base=i * BN, k=K, scale=-1.0, limit=N
      pipe.release xring[s]
    pipe.release qring[qb]
    bar.sync
    topk.reduce out_v[b, sp, t * BM + self * ROWS : +ROWS, :], out_i[b, sp, t * BM + self * ROWS : +ROWS, :] <- lv[self * ROWS : +ROWS, :], li[self * ROWS : +ROWS, :], k=K, oob=skip

kernel merge(part_v: global f32[B, 4, M, K], part_i: global i32[B, 4, M, K], out: global i32[B, M, K])
  domain B >= 1, M >= 1, K in {64, 100, 128}
  const R = 128
  grid (t, b) over (cdiv(M, R), B)
  cta warps 4
  smem sink: f32[R, K] pad 4
  role all warps 0..4:
    topk.reduce sink, out[b, t * R : +R, :] <- part_v[b, :, t * R : +R, :], part_i[b, :, t * R : +R, :], k=K, oob=skip
