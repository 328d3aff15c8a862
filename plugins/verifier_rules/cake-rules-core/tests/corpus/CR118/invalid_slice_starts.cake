# target: h200
# The lowering copies to the start of a stage: a copy into the second half of a buffer's rows would
# land in the first.
kernel halves(x: global bf16[N, 64], y: global bf16[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 64] swizzle 128B
  barrier full: mbarrier count 1
  role main warps 0..4:
    mbarrier.arrive.expect_tx full, bytes=64 * 64 * 2
    tma.load xs[0 : +32, :] <- x[t * 64 : +32, :], full
    tma.load xs[32 : +32, :] <- x[t * 64 + 32 : +32, :], full  # expect-error[CR118]
    mbarrier.wait full, parity=0
    fixture.bulk_store y[t * 64 : +64, :] <- xs
