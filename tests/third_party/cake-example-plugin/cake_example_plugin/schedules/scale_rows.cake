# target: h200
# The `scale-rows` problem with the plugin's own primitive: one CTA of 4 warps per 64 rows; the last
# CTA's tile runs past N unless N is a multiple of 64, and `oob=skip` masks it.
kernel scale_rows(x: global T[N, D], out: global T[N, D])
  domain T in {f32, bf16, f16}, N >= 1, D in {64, 128}
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    scale.rows out[t * R : +R, :] <- x[t * R : +R, :], factor=2.0, oob=skip
