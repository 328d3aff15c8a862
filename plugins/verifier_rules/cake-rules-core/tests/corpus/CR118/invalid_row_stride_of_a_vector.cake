# target: h200
# The norms are f32[B, K]: consecutive batches are K x 4 bytes apart, which a tensor map takes only
# when K is a multiple of 4. K = 101 cannot be launched.
kernel norms(c_sq: global f32[B, K], out: global f32[B, cdiv(K, 128)])
  domain B >= 1, K >= 1
  const BN = 128
  grid (kt, b) over (cdiv(K, BN), B)
  cta warps 4
  smem csq: f32[1, BN] align 128
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg v: f32[1] layout rows
    mbarrier.arrive.expect_tx full, bytes=BN * 4
    tma.load csq <- c_sq[b : +1, kt * BN : +BN], full  # expect-error[CR118]
    mbarrier.wait full, parity=0
    sumsq v <- csq
    store out[b, kt : +1] <- v, oob=skip
