# target: h200
# `scale.rows` from cake-example-plugin, shifted by one row: every read is in bounds (N is a multiple
# of the tile), but the last CTA writes row N, one past the end of `out`. CR108 knows nothing of
# `scale.rows`: it reads the WRITE effect the primitive declares on `dst`.
kernel shifted(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 64, N % 64 == 0
  const R = 64
  grid (t) over (N / R)
  cta warps 4
  role all warps 0..4:
    scale.rows out[t * R + 1 : +R, :] <- x[t * R : +R, :]  # expect-error[CR108]
