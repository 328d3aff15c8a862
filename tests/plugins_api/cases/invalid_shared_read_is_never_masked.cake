# target: a100
# `oob=skip` masks the global write, but `scale.rows` declares its shared read unmasked: reading rows
# 1..32 of a 32-row buffer runs past its end whatever the attribute says.
kernel offset(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  const R = 32
  grid (t) over (cdiv(N, R))
  cta warps 2
  smem xs: f32[R, 64] pad 4  # padded rows: no bank conflicts to warn about
  role all warps 0..2:
    cp.async xs <- x[t * R : +R, :], oob=zero
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    scale.rows out[t * R : +R, :] <- xs[1 : +R, :], oob=skip  # expect-error[CR108]
