# target: h200
# TMA lands dense 128-byte rows; the buffer says every row is 144 bytes: rows after the first shift.
kernel k(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1
  grid (t) over (cdiv(N, 64))
  cta warps 4 occupancy 1
  smem xs: bf16[64, 64] pad 8 align 128
  barrier full: mbarrier count 1
  role all warps 0..4:
    reg s: f32[64, 1] layout rows
    mbarrier.arrive.expect_tx full, bytes=64 * 64 * 2
    tma.load xs <- x[t * 64 : +64, :], full  # expect-error[CR120]
    mbarrier.wait full, parity=0
    sumsq s <- xs
    store out[t * 64 : +64] <- s, oob=skip
