# target: example-gpu
# The tile comes through shared memory (the cp.async read is masked), but the last CTA's write runs
# past N unless N is a multiple of 32, and `scale.rows` is not told to skip it.
kernel staged(x: global f32[N, 64], out: global f32[N, 64])
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
    scale.rows out[t * R : +R, :] <- xs, factor=0.5  # expect-error[CR108]
