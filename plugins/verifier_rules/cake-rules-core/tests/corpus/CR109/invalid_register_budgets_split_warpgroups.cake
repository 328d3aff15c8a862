# target: h100
# `setmaxnreg` is executed per warpgroup alike: a 2-warp producer with its own budget shares
# warpgroup 0 with the 2-warp loader beside it, which has another.
kernel budgets(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12 occupancy 1
  role producer warps 0..2 regs 40:  # expect-error[CR109]
    reg v: f32[128] layout rows
    fill v, value=0.0
  role loader warps 2..4 regs 56:  # expect-error[CR109]
    reg w: f32[128] layout rows
    fill w, value=0.0
  role consumers warps 4..12 regs 200:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
