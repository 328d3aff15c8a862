# target: a100
# The near misses: the upper half of the accumulator (32 rows, one whole m16 pair per warp row),
# starting on a fragment boundary, with full k16 slices.
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
    mma.sync acc[32 : +32, :] <- a[32 : +32, :], bt^T
    mma.sync acc <- a, bt^T
    store out[t * 64 : +64, :] <- acc, oob=skip
