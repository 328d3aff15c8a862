# target: a10
# A fourth stage in the centroid ring: 78 KiB at D=128 fits the 99 KiB of sm_86, but at D=256 the
# kernel needs 108 KiB. The shape domain includes D=256, so the schedule fails.
kernel assign(x: global bf16[N, D], c: global bf16[K, D], out: global f32[N])  # expect-error[CR102]
  domain N >= 1, K >= 1, D in {64, 128, 256}
  const BM = 128, BN = 128, BK = 32, S = 4
  grid (t) over (cdiv(N, BM))
  cta warps 8
  smem xs: bf16[BM, D] pad 8
  smem cs: bf16[S][BN, BK] pad 8
  smem red: f32[2, BM, 2]
  role main warps 0..8:
    reg s: f32[BM] layout rows
    cp.async xs <- x[t * BM : +BM, :], oob=zero
    for p in 0 .. S - 1:
      if p * BK < D:
        cp.async cs[p] <- c[0 : +BN, p * BK : +BK], oob=zero
      cp.async.commit
    cp.async.wait pending=0
    bar.sync
    sumsq s <- xs
    store out[t * BM : +BM] <- s, oob=skip
