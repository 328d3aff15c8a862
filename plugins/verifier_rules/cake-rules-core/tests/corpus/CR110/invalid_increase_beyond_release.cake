# target: h200
# 384 threads start with 168 registers each: the consumers take (232 - 168) x 256 = 16384, the
# producer releases only (168 - 48) x 128 = 15360, and `setmaxnreg.inc` waits forever — although
# 128 x 48 + 256 x 232 = 65536 fits the register file exactly.
kernel budgets(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12 occupancy 1
  role producer warps 0..4 regs 48:
    reg v: f32[128] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 232:  # expect-error[CR110]
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
