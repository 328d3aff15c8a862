# out = y + x @ c^T with the accumulator seeded from registers: all four warps load their rows of y,
# store them into tensor memory with tcgen05.st and wait; thread 0 accumulates the mma onto them
# (accumulate=1); all four warps read the sum back with tcgen05.ld.
kernel seeded_mma(x: global bf16[M, 64], c: global bf16[N, 64], y: global f32[M, N], out: global f32[M, N])
  domain M >= 1, N in {64}
  grid (t) over (cdiv(M, 128))
  cta warps 4
  smem xs: bf16[128, 64] swizzle 128B
  smem cs: bf16[N, 64] swizzle 128B
  barrier loaded: mbarrier count 1
  barrier done: mbarrier count 1
  tmem acc: f32[128, N]
  role all warps 0..4:
    reg d: f32[128, N] layout rows
    reg e: f32[128, N] layout rows
    tcgen05.alloc acc
    tcgen05.relinquish
    mbarrier.arrive.expect_tx loaded, bytes=128 * 64 * 2 + N * 64 * 2
    tma.load xs <- x[t * 128 : +128, :], loaded
    tma.load cs <- c, loaded
    load d <- y[t * 128 : +128, :], oob=zero
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.st acc <- d
    tcgen05.wait.st
    mbarrier.wait loaded, parity=0
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.mma acc <- xs, cs^T, accumulate=1
    tcgen05.commit done
    mbarrier.wait done, parity=0
    tcgen05.fence.after
    tcgen05.ld e <- acc
    tcgen05.wait.ld e
    store out[t * 128 : +128, :] <- e, oob=skip
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.dealloc acc
