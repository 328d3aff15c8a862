# target: h100
# The consumer role is budgeted 64 registers per thread; its accumulator alone takes 64, and the
# bound adds 16 for indices and addresses.
kernel gemm_tile(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12 occupancy 1
  role producer warps 0..4 regs 40:
    reg v: f32[128] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 64:  # expect-error[CR104]
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
