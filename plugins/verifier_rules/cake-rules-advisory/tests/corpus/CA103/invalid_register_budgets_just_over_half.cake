# target: a100
# 384 threads budgeted 88 registers each take 33792 of the SM's 65536: one CTA fits, where 3% fewer
# registers (80 a thread for some warps) would fit two.
kernel budgets(out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 12  # expect-warning[CA103]
  role producer warps 0..4 regs 88:
    reg v: f32[128] layout rows
    fill v, value=0.0
  role consumers warps 4..12 regs 88:
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    fill acc, value=0.0
    store out[t * 128 : +128, :] <- acc, oob=skip
