# target: h200
# A copy may fill a slice of a stage's rows, but a 128B-swizzled slice starts on the swizzle atom (a
# multiple of 8 rows): rows 36..63 would be laid out with the wrong swizzle phase. A copy into a slice of
# a row's columns lands at the start of the row.
kernel halves(x: global bf16[N, 64], y: global bf16[N, 64])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 64] swizzle 128B
  smem ys: bf16[64, 64]
  barrier full: mbarrier count 1
  role main warps 0..4:
    mbarrier.arrive.expect_tx full, bytes=2 * 64 * 64 * 2
    tma.load xs[0 : +36, :] <- x[t * 64 : +36, :], full
    tma.load xs[36 : +28, :] <- x[t * 64 + 36 : +28, :], full  # expect-error[CR118]
    tma.load ys[:, 0 : +32] <- x[t * 64 : +64, 0 : +32], full
    tma.load ys[:, 32 : +32] <- x[t * 64 : +64, 32 : +32], full  # expect-error[CR118]
    mbarrier.wait full, parity=0
    fixture.bulk_store y[t * 64 : +64, :] <- xs
    fixture.bulk_store y[t * 64 : +64, :] <- ys
