# target: h200
# Near miss: clusters of two CTAs share one tile of centroids; each rank multicasts its half of the rows,
# so the halves are disjoint and together fill the tile in both CTAs (the expected bytes are the whole
# tile: both halves land in every CTA).
kernel norms(x: global bf16[B, N, 64], c: global bf16[B, 128, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 128, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 4 cluster (C)
  smem cs: bf16[128, 64] align 128
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg s: f32[R, 1] layout rows
    mbarrier.arrive.expect_tx full, bytes=128 * 64 * 2
    tma.load cs[crank * (128 / C) : +128 / C, :] <- c[b, crank * (128 / C) : +128 / C, :], full, multicast
    mbarrier.wait full, parity=0
    sumsq s <- cs
    store out[b, t * R : +R] <- s, oob=skip
