# target: b200
# One role issues the mma, commits it and reads the accumulator without waiting on the commit's
# barrier: the read may see a partial product. (The interpreter lands the mma at the commit for
# the issuing instance, so only the verifier sees this.)
kernel tile_mma(x: global bf16[M, 64], c: global bf16[128, 64], out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 4
  smem xs: bf16[128, 64] swizzle 128B
  smem cs: bf16[128, 64] swizzle 128B
  barrier loaded: mbarrier count 1
  barrier done: mbarrier count 1
  tmem acc: f32[128, 128]
  role all warps 0..4:
    reg d: f32[128, 128] layout rows
    tcgen05.alloc acc
    tcgen05.relinquish
    mbarrier.arrive.expect_tx loaded, bytes=128 * 64 * 2 + 128 * 64 * 2
    tma.load xs <- x[t * 128 : +128, :], loaded
    tma.load cs <- c, loaded
    mbarrier.wait loaded, parity=0
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.mma acc <- xs, cs^T, accumulate=0
    tcgen05.commit done
    tcgen05.fence.after
    tcgen05.ld d <- acc  # expect-error[BW104]
    tcgen05.wait.ld d
    store out[t * 128 : +128, :] <- d, oob=skip
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.dealloc acc
