# target: h200
# 1024 threads each holding at least 80 registers need 81920, over the 65536 of one block.
kernel gemm_tile(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 512))
  cta warps 32  # expect-error[CR104]
  role main warps 0..32:
    reg acc: f32[512, 128] layout mma_acc(8, 4)
    fill acc, value=0.0
    store out[t * 512 : +512, :] <- acc, oob=skip
