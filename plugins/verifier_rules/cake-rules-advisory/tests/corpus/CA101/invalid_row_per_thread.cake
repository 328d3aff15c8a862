# target: h200
# A `rows` layout gives each thread a row: with rows of 32 f32 (128 bytes), the 32 threads of a warp
# read the same bank on every step.
kernel norms(x: global f32[N, 32], out: global f32[N])
  domain N >= 1, N % 128 == 0
  grid (t) over (N / 128)
  cta warps 4
  smem xs: f32[128, 32]
  role main warps 0..4:
    reg v: f32[128] layout rows
    cp.async xs <- x[t * 128 : +128, :]
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq v <- xs  # expect-warning[CA101]
    store out[t * 128 : +128] <- v
