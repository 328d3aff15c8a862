# target: h100
# A 48-row slice of the accumulator over a 2 x 2 warp grid gives each warp 24 rows: not whole m16
# tiles.
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
    mma.sync acc[0 : +48, :] <- a[0 : +48, :], bt^T  # expect-error[CR107]
    store out[t * 64 : +64, :] <- acc, oob=skip
