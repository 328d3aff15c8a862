# target: h200
# The near misses: the tail write is masked with `oob=skip`; the second kernel's tiles are whole
# because the domain says N is a multiple of 64; the third reads its whole shared tile.
kernel masked(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    scale.rows out[t * R : +R, :] <- x[t * R : +R, :], oob=skip

kernel whole(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 64, N % 64 == 0
  const R = 64
  grid (t) over (N / R)
  cta warps 4
  role all warps 0..4:
    scale.rows out[t * R : +R, :] <- x[t * R : +R, :], factor=-1.0

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
    scale.rows out[t * R : +R, :] <- xs, oob=skip
