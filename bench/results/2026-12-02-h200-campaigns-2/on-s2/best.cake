program kmeans_assign(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  buffer c_sq: global f32[B, K]
  launch centroid_norms(c, c_sq)
  launch assign(x, c, c_sq, out)

kernel centroid_norms(c: global T[B, K, D], c_sq: global f32[B, K])
  domain T in {bf16, f16}, B >= 1, K >= 1, D in {64, 128, 256}
  const R = 64
  grid (w) over (min(SMS, cdiv(K, R) * B))
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    for tile in w .. cdiv(K, R) * B step min(SMS, cdiv(K, R) * B):
      let t = tile % cdiv(K, R)
      let b = tile / cdiv(K, R)
      sumsq s <- c[b, t * R : +R, :], oob=zero
      store c_sq[b, t * R : +R] <- s, oob=skip

kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, K], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  const R = 256
  const BN = 128
  const WM = 4
  const WN = 2
  grid (w) over (min(SMS, cdiv(N, R) * B))
  cta warps WM * WN
  smem xs: T[R, D] swizzle 128B
  smem cs: T[BN, D] pad 8
  smem red: f32[2, R, WN] pad 8
  role all warps 0..WM * WN:
    reg acc: f32[R, BN] layout mma_acc(WM, WN)
    reg a: T[R, 16] layout mma_a(WM, WN)
    reg bt: T[BN, 16] layout mma_b(WM, WN)
    reg bv: f32[R] layout mma_rows(WM, WN)
    reg bi: i32[R] layout mma_rows(WM, WN)
    reg bv_rows: f32[R] layout rows
    reg bi_rows: i32[R] layout rows
    for tile in w .. cdiv(N, R) * B step min(SMS, cdiv(N, R) * B):
      let t = tile % cdiv(N, R)
      let b = tile / cdiv(N, R)
      fill bv, value=inf
      fill bi, value=-1
      cp.async xs <- x[b, t * R : +R, :], oob=zero
      for kt in 0 .. cdiv(K, BN):
        cp.async cs <- c[b, kt * BN : +BN, :], oob=zero
        cp.async.commit
        cp.async.wait pending=0
        bar.sync
        fill acc, value=0.0
        for kk in 0 .. D / 16:
          ldmatrix a <- xs[:, kk * 16 : +16]
          ldmatrix bt <- cs[:, kk * 16 : +16]
          mma.sync acc <- a, bt^T
        argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN, scale=-2.0, oob=skip
        bar.sync
      argmin.reduce bv_rows, bi_rows <- bv, bi, red
      store out[b, t * R : +R] <- bi_rows, oob=skip
      bar.sync
