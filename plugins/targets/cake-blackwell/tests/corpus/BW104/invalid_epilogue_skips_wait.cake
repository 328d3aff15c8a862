# target: b200
# The epilogue role reads the accumulator the MMA role commits to `done` without waiting on it.
kernel tile_mma(x: global bf16[M, 64], c: global bf16[128, 64], out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 5
  smem xs: bf16[128, 64] swizzle 128B
  smem cs: bf16[128, 64] swizzle 128B
  barrier loaded: mbarrier count 1
  barrier done: mbarrier count 1
  tmem acc: f32[128, 128]
  role epi warps 0..4:
    reg d: f32[128, 128] layout rows
    bar.sync
    tcgen05.fence.after

    tcgen05.fence.after
    tcgen05.ld d <- acc  # expect-error[BW104]
    tcgen05.wait.ld d
    store out[t * 128 : +128, :] <- d, oob=skip
    tcgen05.fence.before
    bar.sync
  role mma warps 4..5:
    tcgen05.alloc acc
    tcgen05.relinquish
    mbarrier.arrive.expect_tx loaded, bytes=128 * 64 * 2 + 128 * 64 * 2
    tma.load xs <- x[t * 128 : +128, :], loaded
    tma.load cs <- c, loaded
    tcgen05.fence.before
    bar.sync
    mbarrier.wait loaded, parity=0
    tcgen05.fence.after
    tcgen05.mma acc <- xs, cs^T, accumulate=0
    tcgen05.commit done
    bar.sync
    tcgen05.fence.after
    tcgen05.dealloc acc
