# target: a100
# Slices that start 8 rows into a 16-row fragment.
kernel mm(out: global f32[M, 64])
  domain M >= 1
  grid (t) over (cdiv(M, 64))
  cta warps 4
  role main warps 0..4:
    reg acc: f32[64, 64] layout mma_acc(1, 4)
    reg a: bf16[64, 16] layout mma_a(1, 4)
    reg bt: bf16[64, 16] layout mma_b(1, 4)
    fill acc, value=0.0
    fill a, value=1.0
    fill bt, value=1.0
    mma.sync acc[8 : +32, :] <- a[8 : +32, :], bt^T  # expect-error[CR107]
    store out[t * 64 : +64, :] <- acc, oob=skip
