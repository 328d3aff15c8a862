# target: h200
# `setmaxnreg` takes multiples of 8 from 24 to 256: 230 is neither, 20 neither (and is below the floor).
kernel budgets(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12 occupancy 1
  role producer warps 0..4 regs 20:  # expect-error[CR110]
    reg v: f32[8] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 230:  # expect-error[CR110]
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
