# target: h100
# Without `occupancy 1` there is no register cap at entry, and ptxas ignores `setmaxnreg`.
kernel budgets(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12  # expect-error[CR110]
  role producer warps 0..4 regs 40:
    reg v: f32[128] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 232:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
