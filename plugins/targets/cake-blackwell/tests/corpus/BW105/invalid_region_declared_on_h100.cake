# target: h100
# No operation uses tensor memory, but a region is declared for a target that has none.
kernel copy(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  grid (t) over (cdiv(N, 128))
  cta warps 4
  tmem acc: f32[128, 128]  # expect-error[BW105]
  role all warps 0..4:
    reg v: f32[128, 64] layout rows
    load v <- x[t * 128 : +128, :], oob=zero
    store out[t * 128 : +128, :] <- v, oob=skip
