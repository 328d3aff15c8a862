# A [128, 64] tile of x times a [N, 64] tile of c transposed, accumulated in tensor memory, stored in f32.
# TMA brings both tiles into 128B-swizzled shared memory; thread 0 issues the tcgen05.mma (4 k steps)
# and commits it to `done`; all four warps wait, read their 32 lanes with tcgen05.ld and store them.
kernel tile_mma(x: global bf16[M, 64], c: global bf16[N, 64], out: global f32[M, N])
  domain M >= 1, N in {64, 128}
  grid (t) over (cdiv(M, 128))
  cta warps 4
  smem xs: bf16[128, 64] swizzle 128B
  smem cs: bf16[N, 64] swizzle 128B
  barrier loaded: mbarrier count 1
  barrier done: mbarrier count 1
  tmem acc: f32[128, N]
  role all warps 0..4:
    reg d: f32[128, N] layout rows
    tcgen05.alloc acc
    tcgen05.relinquish
    mbarrier.arrive.expect_tx loaded, bytes=128 * 64 * 2 + N * 64 * 2
    tma.load xs <- x[t * 128 : +128, :], loaded
    tma.load cs <- c, loaded
    mbarrier.wait loaded, parity=0
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.mma acc <- xs, cs^T, accumulate=0
    tcgen05.commit done
    mbarrier.wait done, parity=0
    tcgen05.fence.after
    tcgen05.ld d <- acc
    tcgen05.wait.ld d
    store out[t * 128 : +128, :] <- d, oob=skip
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.dealloc acc
