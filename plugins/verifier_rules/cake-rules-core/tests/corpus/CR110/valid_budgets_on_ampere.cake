# target: a100
# Near miss: on sm_80 there is no `setmaxnreg`; role budgets only bound the register estimate, so
# neither their granularity nor an occupancy promise matters here.
kernel budgets(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12
  role producer warps 0..4 regs 36:
    reg v: f32[128] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 230:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
