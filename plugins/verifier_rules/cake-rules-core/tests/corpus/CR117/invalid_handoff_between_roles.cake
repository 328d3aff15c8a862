# target: h200
# One role writes the tile with ordinary stores and hands it over on an mbarrier; the other role
# stores it out through the async proxy. The fence belongs in the writer, before its arrival.
kernel emit(out: global f32[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 8
  smem buf: f32[64, 64] align 128
  barrier ready: mbarrier count 1
  role writer warps 0..4:
    reg v: f32[64, 64] layout rows
    fill v, value=1.0
    store buf <- v  # expect-error[CR117]
    mbarrier.arrive ready, per=instance
  role emitter warps 4..8:
    mbarrier.wait ready, parity=0
    fixture.bulk_store out[t * 64 : +64, :] <- buf
