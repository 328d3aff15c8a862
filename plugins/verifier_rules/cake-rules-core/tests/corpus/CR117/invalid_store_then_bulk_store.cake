# target: h200
# Registers go to shared memory through the generic proxy and leave through a bulk store (the async
# proxy): the CTA barrier orders the threads, not the proxies.
kernel emit(out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem buf: f32[64, 64] align 128
  role main warps 0..4:
    reg v: f32[64, 64] layout rows
    fill v, value=1.0
    store buf <- v  # expect-error[CR117]
    bar.sync
    fixture.bulk_store out[t * 64 : +64, :] <- buf
