# target: b200
# The near miss: the same kernel for b200, which has tensor memory (an unused region is legal).
kernel copy(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  grid (t) over (cdiv(N, 128))
  cta warps 4
  tmem acc: f32[128, 128]
  role all warps 0..4:
    reg v: f32[128, 64] layout rows
    load v <- x[t * 128 : +128, :], oob=zero
    store out[t * 128 : +128, :] <- v, oob=skip
