# target: b200
# The near miss of a pipelined MMA: a commit inside the K loop frees each shared-memory stage, a
# last one after the loop completes the accumulator, and the epilogue waits on that last one (every
# commit covers all the mma work issued before it).
kernel tile_mma(x: global bf16[M, 128], c: global bf16[128, 128], out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 5
  smem xs: bf16[2][128, 64] swizzle 128B
  smem cs: bf16[2][128, 64] swizzle 128B
  barrier loaded: mbarrier count 1
  barrier freed: mbarrier[2] count 1
  barrier done: mbarrier count 1
  tmem acc: f32[128, 128]
  role epi warps 0..4:
    reg d: f32[128, 128] layout rows
    bar.sync
    tcgen05.fence.after
    mbarrier.wait done, parity=0
    tcgen05.fence.after
    tcgen05.ld d <- acc
    tcgen05.wait.ld d
    store out[t * 128 : +128, :] <- d, oob=skip
    tcgen05.fence.before
    bar.sync
  role mma warps 4..5:
    tcgen05.alloc acc
    tcgen05.relinquish
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    mbarrier.arrive.expect_tx loaded, bytes=2 * (128 * 64 * 2 + 128 * 64 * 2)
    tma.load xs[0] <- x[t * 128 : +128, 0 : +64], loaded
    tma.load xs[1] <- x[t * 128 : +128, 64 : +64], loaded
    tma.load cs[0] <- c[:, 0 : +64], loaded
    tma.load cs[1] <- c[:, 64 : +64], loaded
    mbarrier.wait loaded, parity=0
    for k in 0 .. 2:
      tcgen05.mma acc <- xs[k], cs[k]^T, accumulate=k
      tcgen05.commit freed[k]
    tcgen05.commit done
    bar.sync
    tcgen05.fence.after
    tcgen05.dealloc acc
