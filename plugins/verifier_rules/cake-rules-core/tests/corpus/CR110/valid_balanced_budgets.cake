# target: h200
# Near miss: the producer releases exactly what the consumers take, (168 - 40) x 128 =
# (232 - 168) x 256 = 16384: 128 x 40 + 256 x 232 = 64512 of the 64K registers.
kernel budgets(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12 occupancy 1
  role producer warps 0..4 regs 40:
    reg v: f32[128] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 232:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
