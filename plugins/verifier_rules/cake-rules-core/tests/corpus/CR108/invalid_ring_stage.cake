# target: a100
# A ring of three stages indexed modulo four: stage 3 does not exist, and it overwrites whatever
# follows the ring in shared memory. Nothing masks a shared-memory stage.
kernel ring(x: global f32[N, 128], out: global f32[N])
  domain N >= 1
  grid (b) over (1)
  cta warps 4
  smem cs: f32[3][128]
  role all warps 0..4:
    reg v: f32[128] layout rows
    for i in 0 .. N:
      sumsq v <- x[i * 128 : +128, :], oob=zero
      store cs[i % 4] <- v  # expect-error[CR108]
      bar.sync
