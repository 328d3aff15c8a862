# target: h200
# The shared destination of a bulk copy is 128-byte aligned: stages of 24 f32 are 96 bytes apart,
# and without `align` the buffer is only known to be 16-byte aligned.
kernel rows(x: global f32[N, 24], out: global f32[N])
  domain N >= 1, N % 3 == 0
  const S = 3
  grid (t) over (N / 3)
  cta warps 1
  smem xs: f32[S][1, 24]
  barrier full: mbarrier[S] count 1
  role main warps 0..1:
    reg v: f32[1] layout rows
    for i in 0 .. S:
      mbarrier.arrive.expect_tx full[i], bytes=24 * 4
      tma.load xs[i] <- x[t * 3 + i : +1, :], full[i]  # expect-error[CR118]
    for j in 0 .. S:
      mbarrier.wait full[j], parity=0
      sumsq v <- xs[j]
      store out[t * 3 + j : +1] <- v
