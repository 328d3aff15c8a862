# target: h100
# The near miss of invalid_role_budget: a budget of 96 covers 64 + 16; 3 CTAs of 256 threads x 80
# registers fit one SM's 65536.
kernel gemm_tile(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 8 occupancy 3
  role main warps 0..8:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
