# target: h200
# At most 128 centroids: the loop over 64-centroid tiles runs at most twice, the ring has 3 stages.
kernel tiles(c: global bf16[K, 64], out: global f32[K])
  domain K >= 1, K <= 128
  const S = 3
  grid (g) over (1)
  cta warps 2
  smem cs: bf16[S][64, 64] pad 8  # expect-warning[CA102]
  role main warps 0..2:
    reg v: f32[64] layout rows
    for kt in 0 .. cdiv(K, 64):
      cp.async cs[kt % S] <- c[kt * 64 : +64, :], oob=zero
      cp.async.commit
      cp.async.wait pending=0
      bar.sync
      sumsq v <- cs[kt % S]
      store out[kt * 64 : +64] <- v, oob=skip
