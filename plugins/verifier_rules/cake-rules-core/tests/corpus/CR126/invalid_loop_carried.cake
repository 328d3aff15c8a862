# target: h200
# The barrier orders the first store before the first load, but nothing orders the store at the end of
# one trip before the `load` at the top of the next: the loop carries the write around without a barrier.
kernel rows(x: global f32[N, 64], y: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (1)
  cta warps 4
  smem buf: f32[64, 64]
  role all warps 0..4:
    reg v: f32[64, 64] layout rows
    reg w: f32[64, 64] layout rows
    fill v, value=0.0
    store buf <- v
    bar.sync
    for i in 0 .. N / 64:
      load w <- buf  # expect-error[CR126]
      store y[i * 64 : +64, :] <- w
      load v <- x[i * 64 : +64, :]
      store buf <- v
