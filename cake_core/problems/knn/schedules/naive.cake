# target: h200
# Brute-force k nearest neighbours, the naive schedule: one thread per query, one point at a time.
# Every point's q.x is a per-row dot product on CUDA cores, folded into sorted per-query lists of
# the K smallest ||x||^2 - 2 q.x held in registers.
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
    sumsq s <- x[b, t*R : +R, :], oob=zero
    store x_sq[b, t*R : +R] <- s, oob=skip

kernel topk(q: global T[B, M, D], x: global T[B, N, D], x_sq: global f32[B, N], out: global i32[B, M, K])
  domain T in {bf16, f16}, B >= 1, M >= 1, N >= 1, D in {64, 128, 256}, K in {1, 2, 4, 8, 10, 16, 32}
  const R = 128
  grid (t, b) over (cdiv(M, R), B)
  cta warps 4
  role all warps 0..4:
    reg tv: f32[R, K] layout rows
    reg ti: i32[R, K] layout rows
    reg dot: f32[R, 1] layout rows
    fill tv, value=inf
    fill ti, value=-1
    for j in 0 .. N:
      rowdot dot <- q[b, t*R : +R, :], x[b, j, :], oob=zero
      topk.update tv, ti <- dot, x_sq[b, j : +1], base=j, k=K, scale=-2.0, oob=skip
    store out[b, t*R : +R, :] <- ti, oob=skip
