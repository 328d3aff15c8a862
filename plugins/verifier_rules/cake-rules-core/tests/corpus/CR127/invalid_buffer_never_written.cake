# target: h200
# `ws` is declared and read but nothing writes it: the argmin's bias is whatever shared memory held.
kernel nearest(d: global f32[N, K], out: global i32[N])
  domain N >= 1, K >= 32, K % 32 == 0
  const R = 128, BN = 32
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem ws: f32[BN]
  role all warps 0..4:
    reg dv: f32[R, BN] layout rows
    reg bv: f32[R] layout rows
    reg bi: i32[R] layout rows
    fill bv, value=inf
    fill bi, value=-1
    for kt in 0 .. K / BN:
      load dv <- d[t * R : +R, kt * BN : +BN], oob=zero
      argmin.update bv, bi <- dv, ws, base=kt * BN  # expect-error[CR127]
    store out[t * R : +R] <- bi, oob=skip
