# target: h200
# A barrier whose count is 0: no phase could ever need an arrival, and mbarrier.init refuses it.
kernel k(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1
  grid (t) over (cdiv(N, 64))
  cta warps 4 occupancy 1
  smem xs: bf16[64, 64] align 128
  barrier full: mbarrier count 0  # expect-error[CR111]
  role all warps 0..4:
    reg s: f32[64, 1] layout rows
    mbarrier.arrive.expect_tx full, bytes=64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], full
    mbarrier.wait full, parity=0
    sumsq s <- xs
    store out[t * 64 : +64] <- s, oob=skip
