# target: h200
# Near miss: the tiles run past N (rows, zero-filled) but K is a multiple of the tile, so no column is
# ever padding, and rows are not what the argmin reduces over: no `limit` is needed.
kernel nearest(d: global f32[N, K], w: global f32[K], out: global i32[N])
  domain N >= 1, K >= 32, K % 32 == 0
  const R = 128, BN = 32
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg dv: f32[R, BN] layout rows
    reg bv: f32[R] layout rows
    reg bi: i32[R] layout rows
    fill bv, value=inf
    fill bi, value=-1
    for kt in 0 .. K / BN:
      load dv <- d[t * R : +R, kt * BN : +BN], oob=zero
      argmin.update bv, bi <- dv, w[kt * BN : +BN], base=kt * BN
    store out[t * R : +R] <- bi, oob=skip
