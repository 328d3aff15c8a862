# target: h200
# Near miss: stage 1 of the ring is filled only inside the loop, after stage 0 is first read; every
# stage read is filled by some copy (when, relative to the read, is CR115's business).
kernel norms(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128, S = 2
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem xs: bf16[S][R, 64] pad 8
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    cp.async xs[0] <- x[t * R : +R, :], oob=zero
    cp.async.commit
    for i in 0 .. 2:
      cp.async.wait pending=0
      bar.sync
      sumsq s <- xs[i % S]
      bar.sync
      if i == 0:
        cp.async xs[1] <- x[t * R : +R, :], oob=zero
      cp.async.commit
    store out[t * R : +R] <- s, oob=skip
