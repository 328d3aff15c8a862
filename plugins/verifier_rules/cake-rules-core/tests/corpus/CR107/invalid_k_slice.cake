# target: a100
# Slices of 8 in k: mma.sync m16n8k16 multiplies k16 slices only. (The declared fragments are fine;
# the type checker sees [64, 8] by [64, 8]^T into [64, 64] and agrees.)
kernel mm(out: global f32[M, 64])
  domain M >= 1
  grid (t) over (cdiv(M, 64))
  cta warps 4
  role main warps 0..4:
    reg acc: f32[64, 64] layout mma_acc(2, 2)
    reg a: bf16[64, 16] layout mma_a(2, 2)
    reg bt: bf16[64, 16] layout mma_b(2, 2)
    fill acc, value=0.0
    fill a, value=1.0
    fill bt, value=1.0
    mma.sync acc <- a[:, 0 : +8], bt[:, 0 : +8]^T  # expect-error[CR107]
    store out[t * 64 : +64, :] <- acc, oob=skip
