# target: a100
# A [128, 256] f32 accumulator over 2 x 2 warps: each warp holds [64, 128], 256 registers per thread
# for this tile alone, over the 255 a thread can have.
kernel gemm_tile(out: global f32[M, 256])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 4
  role main warps 0..4:  # expect-error[CR104]
    reg acc: f32[128, 256] layout mma_acc(2, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
