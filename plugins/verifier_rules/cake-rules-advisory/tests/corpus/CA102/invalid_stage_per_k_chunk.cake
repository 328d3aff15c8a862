# target: h200
# One stage per 64-column chunk of a row: D/64 chunks fill 1, 2 or 4 of the 4 stages.
kernel norms(x: global bf16[N, D], out: global f32[N, D / 64])
  domain N >= 1, N % 64 == 0, D in {64, 128, 256}
  grid (t) over (N / 64)
  cta warps 2
  smem xs: bf16[4][64, 64] pad 8  # expect-warning[CA102]
  role main warps 0..2:
    reg v: f32[64, 1] layout rows
    for kc in 0 .. D / 64:
      cp.async xs[kc] <- x[t * 64 : +64, kc * 64 : +64]
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    for kr in 0 .. D / 64:
      sumsq v <- xs[kr]
      store out[t * 64 : +64, kr : +1] <- v
