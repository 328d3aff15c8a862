# target: h100
# Warp-specialized budgets: 128 x 40 + 256 x 96 = 29696 registers, and each role fits its budget
# (`occupancy 1` gives `setmaxnreg` the register cap at entry it needs).
kernel gemm_tile(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12 occupancy 1
  role producer warps 0..4 regs 40:
    reg v: f32[128] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 96:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
