# target: a100
# The near miss of invalid_row_pitches: `K % 8 == 0` makes every row pitch of `x` a multiple of 16
# bytes, 8 bf16 of padding make the shared rows 144 bytes, and column starts step by 32 bf16.
kernel stage(x: global bf16[N, K], out: global f32[N])
  domain N >= 1, K >= 64, K % 8 == 0
  const R = 64
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[R, 64] pad 8
  smem ring: bf16[2][R, 32] pad 8
  role all warps 0..4:
    reg s: f32[R] layout rows
    cp.async xs <- x[t * R : +R, 0 : +64], oob=zero
    for k in 0 .. 2:
      cp.async ring[k] <- x[t * R : +R, k * 32 : +32], oob=zero
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs
    store out[t * R : +R] <- s, oob=skip
