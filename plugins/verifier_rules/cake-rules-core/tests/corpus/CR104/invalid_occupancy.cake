# target: a100
# 256 threads x 80 registers = 20480 per CTA: four resident CTAs would need 81920, over 65536 per SM.
kernel gemm_tile(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 8 occupancy 4  # expect-error[CR104]
  role main warps 0..8:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
