# target: h200
# Brute-force k nearest neighbours as the wgmma tactic leaves it (a test input of the warpgroups tactic):
# a producer warpgroup streams each CTA's queries and every tile of points through TMA; consumer
# warpgroups (WG = WM * WN / 4, written in the warps the mma.sync form had) each score their ROWS queries
# with wgmma and fold the scores, through shared memory, into sorted per-query lists (one list a query:
# P = 1, so that one warpgroup of 128 queries still fits its registers; `topk.*` is
# interpreter only: not lowered yet).
program knn(q: global T[B, M, D], x: global T[B, N, D], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  buffer x_sq: global f32[B, N]
  launch point_norms(x, x_sq)
  launch topk(q, x, x_sq, out)

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
  const BM = 128
  const BN = 64
  const S = 2
  const WM = 4
  const WN = 2
  const P = 1
  const WG = WM * WN / 4
  const ROWS = BM / WG
  grid (t, b) over (cdiv(M, BM), B)
  cta warps 4 + WM * WN occupancy 1
  smem qs: T[1][BM, D] swizzle 128B align 128
  smem xs: T[S][BN, D] swizzle 128B align 128
  smem sc: f32[BM, BN] pad 4
  pipe qring: producer -> main of qs
  pipe xring: producer -> main of xs
  role producer warps 0..4 regs 40:
    let NC = cdiv(N, BN)
    pipe.acquire qb <- qring
    tma.load qs[qb] <- q[b, t * BM : +BM, :]
    for i in 0 .. NC:
      pipe.acquire s <- xring
      tma.load xs[s] <- x[b, i * BN : +BN, :]
      bar.sync
      bar.sync
  role main warps 4..4 + WM * WN per 4 regs 208:
    reg acc: f32[ROWS, BN] layout wgmma_acc
    reg tv: f32[ROWS * P, K] layout rows
    reg ti: i32[ROWS * P, K] layout rows
    reg fv: f32[ROWS, K] layout rows
    reg fi: i32[ROWS, K] layout rows
    fill tv, value=inf
    fill ti, value=-1
    let NC = cdiv(N, BN)
    pipe.wait qb <- qring
    for i in 0 .. NC:
      pipe.wait s <- xring
      wgmma acc <- qs[qb, self * ROWS : +ROWS, :], xs[s]^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      pipe.release xring[s]
      store sc[self * ROWS : +ROWS, :] <- acc
      bar.sync
      topk.update tv, ti <- sc[self * ROWS : +ROWS, :], x_sq[b, i * BN : +BN], base=i * BN, k=K, scale=-2.0, split=P, oob=skip
      bar.sync
    pipe.release qring[qb]
    topk.reduce fv, fi <- tv, ti, k=K
    store out[b, t * BM + self * ROWS : +ROWS, :] <- fi, oob=skip

