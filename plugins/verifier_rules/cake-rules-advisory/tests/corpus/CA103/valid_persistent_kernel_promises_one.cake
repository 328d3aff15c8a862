# target: h200
# Near miss: the same rows, but the kernel promises `occupancy 1` (one persistent CTA per SM): the
# author chose its CTAs per SM.
kernel rows(x: global bf16[N, 128], out: global f32[N])
  domain N >= 1, N % 432 == 0
  grid (t) over (N / 432)
  cta warps 4 occupancy 1
  smem xs: bf16[432, 128] pad 8
  role main warps 0..4:
    reg v: f32[432] layout rows
    cp.async xs <- x[t * 432 : +432, :]
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq v <- xs
    store out[t * 432 : +432] <- v
