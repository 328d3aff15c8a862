# target: h200
# Near miss: without an upper bound on K the loop fills the ring as often as K asks.
kernel tiles(c: global bf16[K, 64], out: global f32[K])
  domain K >= 1
  const S = 3
  grid (g) over (1)
  cta warps 2
  smem cs: bf16[S][64, 64] pad 8
  role main warps 0..2:
    reg v: f32[64] layout rows
    for kt in 0 .. cdiv(K, 64):
      cp.async cs[kt % S] <- c[kt * 64 : +64, :], oob=zero
      cp.async.commit
      cp.async.wait pending=0
      bar.sync
      sumsq v <- cs[kt % S]
      store out[kt * 64 : +64] <- v, oob=skip
