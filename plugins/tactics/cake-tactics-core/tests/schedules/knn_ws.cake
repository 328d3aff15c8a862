# target: h200
# Brute-force k nearest neighbours, warp-specialized (a test input of the registers and persistent
# tactics): a producer warpgroup streams each CTA's queries and every tile of points through TMA into
# pipes; a consumer warpgroup scores the queries against each point with `rowdot` and folds the scores
# into sorted per-query lists (`topk.update`, interpreter only: `topk.*` is not lowered yet).
program knn(q: global T[B, M, D], x: global T[B, N, D], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  buffer x_sq: global f32[B, N]
  launch point_norms(x, x_sq)
  launch topk(q, x, x_sq, out)

# ||x||^2 for every point, one row per thread (32 points a CTA: the interpreter gate's samples of N
# grow from the largest tile that divides N, and the scoring loop below runs once per point)
kernel point_norms(x: global T[B, N, D], x_sq: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128, 256}
  const R = 32
  grid (t, b) over (cdiv(N, R), B)
  cta warps 1
  role all warps 0..1:
    reg s: f32[R, 1] layout rows
    sumsq s <- x[b, t * R : +R, :], oob=zero
    store x_sq[b, t * R : +R] <- s, oob=skip

kernel topk(q: global T[B, M, D], x: global T[B, N, D], x_sq: global f32[B, N], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  const BM = 128, BN = 32, S = 2
  grid (t, b) over (cdiv(M, BM), B)
  cta warps 8 occupancy 1
  smem qs: T[1][BM, D] align 128
  smem xs: T[S][BN, D] align 128
  pipe qring: producer -> main of qs
  pipe xring: producer -> main of xs
  role producer warps 0..4:
    let NT = cdiv(N, BN)
    pipe.acquire qb <- qring
    tma.load qs[qb] <- q[b, t * BM : +BM, :]
    for i in 0 .. NT:
      pipe.acquire s <- xring
      tma.load xs[s] <- x[b, i * BN : +BN, :]
  role main warps 4..8:
    reg dot: f32[BM, 1] layout rows
    reg tv: f32[BM, K] layout rows
    reg ti: i32[BM, K] layout rows
    reg fv: f32[BM, K] layout rows
    reg fi: i32[BM, K] layout rows
    fill tv, value=inf
    fill ti, value=-1
    let NT = cdiv(N, BN)
    pipe.wait qb <- qring
    for i in 0 .. NT:
      pipe.wait s <- xring
      for j in 0 .. BN:
        rowdot dot <- qs[qb], xs[s][j, :]
        topk.update tv, ti <- dot, x_sq[b, i * BN + j : +1], base=i * BN + j, k=K, scale=-2.0, oob=skip
      pipe.release xring[s]
    pipe.release qring[qb]
    topk.reduce fv, fi <- tv, ti, k=K
    store out[b, t * BM : +BM, :] <- fi, oob=skip
