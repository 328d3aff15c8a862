# target: h200
# Near miss: a CTA barrier between the threads' stores and the load that reads the whole tile.
kernel copy(x: global f32[N, 64], y: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem buf: f32[64, 64]
  role all warps 0..4:
    reg v: f32[64, 64] layout rows
    reg w: f32[64, 64] layout rows
    load v <- x[t * 64 : +64, :]
    store buf <- v
    bar.sync
    load w <- buf
    store y[t * 64 : +64, :] <- w
