# target: h200
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
  const BM = 64, BN = 64
  grid (t, b) over (cdiv(N, BM), B)
  cta warps 4
  smem xs: T[BM, D] swizzle 128B
  smem cs: T[BN, D] swizzle 128B
  role main warps 0..4 per 4:
    reg acc: f32[BM, BN] layout wgmma_acc
    reg bv: f32[BM] layout wgmma_rows
    reg bi: i32[BM] layout wgmma_rows
    fill bv, value=inf
    fill bi, value=-1
    cp.async xs <- x[b, t * BM : +BM, :], oob=zero
    for kt in 0 .. cdiv(K, BN):
      cp.async cs <- c[b, kt * BN : +BN, :], oob=zero
      cp.async.commit
      cp.async.wait pending=0
      bar.sync
      fence.proxy_async
      wgmma acc <- xs, cs^T, accumulate=0
      wgmma.commit
      wgmma.wait pending=0
      argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, limit=K
      bar.sync
    argmin.reduce bv, bi <- bv, bi
    store out[b, t * BM : +BM] <- bi, oob=skip
