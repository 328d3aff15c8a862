# target: h200
# The fence is taken on the first round only: every later tile reaches the bulk store unfenced.
kernel emit(out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  const R = 4
  grid (t) over (cdiv(N, 64 * R))
  cta warps 4
  smem buf: f32[R][64, 64] align 128
  role main warps 0..4:
    reg v: f32[64, 64] layout rows
    for r in 0 .. R:
      fill v, value=1.0
      store buf[r] <- v  # expect-error[CR117]
      if r == 0:
        fence.proxy_async
      bar.sync
      fixture.bulk_store out[(t * R + r) * 64 : +64, :] <- buf[r]
