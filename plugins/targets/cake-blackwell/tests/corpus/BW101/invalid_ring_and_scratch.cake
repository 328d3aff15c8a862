# target: b200
# A two-stage ring of 256 columns (512 in all) and the 128-column accumulator: each allocation is
# legal alone, together they need 640 columns.
kernel tile_mma(x: global bf16[M, 64], c: global bf16[128, 64], out: global f32[M, 128])
  domain M >= 1
  grid (t) over (cdiv(M, 128))
  cta warps 4
  smem xs: bf16[128, 64] swizzle 128B
  smem cs: bf16[128, 64] swizzle 128B
  barrier loaded: mbarrier count 1
  barrier done: mbarrier count 1
  tmem acc: f32[128, 128]
  tmem ring: f32[2][128, 256]
  role all warps 0..4:
    reg d: f32[128, 128] layout rows
    tcgen05.alloc ring
    tcgen05.alloc acc  # expect-error[BW101]
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
    mbarrier.wait done, parity=0
    tcgen05.fence.after
    tcgen05.ld d <- acc
    tcgen05.wait.ld d
    store out[t * 128 : +128, :] <- d, oob=skip
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    tcgen05.dealloc acc
    tcgen05.dealloc ring
