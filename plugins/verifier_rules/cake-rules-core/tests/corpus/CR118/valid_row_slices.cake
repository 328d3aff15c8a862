# target: h200
# Near miss: two copies fill the two halves of the rows of a 128B-swizzled stage whose rows span two
# swizzle panels; each half starts on the swizzle atom (rows 0 and 32), and the lowering lays each copy's
# panels a whole stage's rows apart.
kernel halves(x: global bf16[N, 128], y: global bf16[N, 128])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 128] swizzle 128B
  barrier full: mbarrier count 1
  role main warps 0..4:
    mbarrier.arrive.expect_tx full, bytes=64 * 128 * 2
    tma.load xs[0 : +32, :] <- x[t * 64 : +32, :], full
    tma.load xs[32 : +32, :] <- x[t * 64 + 32 : +32, :], full
    mbarrier.wait full, parity=0
    fixture.bulk_store y[t * 64 : +64, :] <- xs
