# target: h200
# ADVERSARIAL (issue 12, item 7), derived from naive.cake: this candidate is correct only on all-zero inputs
# (every distance ties, index 0 wins): it looks at centroid 0 only.
# Caught by: the interpreter gate, CS009 (wrong answer); on the H200 the oracle (random inputs, never all
# zeros).
# K-Means assignment, the naive schedule.
program kmeans_assign(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer c_sq: global f32[B, K]
  launch centroid_norms(c, c_sq)
  launch assign(x, c, c_sq, out)

kernel centroid_norms(c: global T[B, K, D], c_sq: global f32[B, K])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- c[b, t*R : +R, :], oob=zero
    store c_sq[b, t*R : +R] <- s, oob=skip

kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, K], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(N, R), B)
  cta warps 4
  role all warps 0..4:
    reg bv: f32[R] layout rows
    reg bi: i32[R] layout rows
    reg dot: f32[R, 1] layout rows
    fill bv, value=inf
    fill bi, value=-1
    for k in 0 .. 1:
      rowdot dot <- x[b, t*R : +R, :], c[b, k, :], oob=zero
      argmin.update bv, bi <- dot, c_sq[b, k : +1], base=k, scale=-2.0
    store out[b, t*R : +R] <- bi, oob=skip
