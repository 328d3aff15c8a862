# target: h200
# An unswizzled row of 512 elements is two boxes too wide; a 128B-swizzled row of 32 bf16 (64 bytes)
# is not a whole panel.
kernel tiles(x: global bf16[N, 512], y: global bf16[N, 32], out: global f32[N])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 512] align 128
  smem ys: bf16[64, 32] swizzle 128B
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg v: f32[64] layout rows
    mbarrier.arrive.expect_tx full, bytes=64 * 512 * 2 + 64 * 32 * 2
    tma.load xs <- x[t * 64 : +64, :], full  # expect-error[CR118]
    tma.load ys <- y[t * 64 : +64, :], full  # expect-error[CR118]
    mbarrier.wait full, parity=0
    sumsq v <- xs
    store out[t * 64 : +64] <- v
