# target: b200
# K-Means assignment on Blackwell (sm_100a): a persistent, warp-specialized kernel. A producer warp
# streams each CTA's rows of x and every centroid tile through TMA into 128B-swizzled shared memory;
# one thread of the mma warp multiplies them with tcgen05.mma into one of two tensor-memory
# accumulators (one mma per K step of 16); an epilogue warpgroup reads the other accumulator with
# tcgen05.ld and folds it into a running argmin while the next centroid tile is multiplied. The
# output contract is hopper.cake's. Nothing here has run on a B200 (ran: false).
program kmeans_assign(x: global T[B, N, D], c: global T[B, K, D], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, D in {64, 128, 256}
  # rows of c_sq padded to a multiple of 4 floats: the tensor map over it needs 16-byte row strides
  buffer c_sq: global f32[B, cdiv(K, 4) * 4]
  launch centroid_norms(c, c_sq)
  launch assign(x, c, c_sq, out)

# ||c||^2 for every centroid, one row per thread
kernel centroid_norms(c: global T[B, K, D], c_sq: global f32[B, KP])
  domain T in {bf16, f16}, B >= 1, K >= 1, KP >= K, D in {64, 128, 256}
  const R = 128
  grid (t, b) over (cdiv(K, R), B)
  cta warps 4
  role all warps 0..4:
    reg s: f32[R, 1] layout rows
    sumsq s <- c[b, t * R : +R, :], oob=zero
    store c_sq[b, t * R : +R] <- s, oob=skip

kernel assign(x: global T[B, N, D], c: global T[B, K, D], c_sq: global f32[B, KP], out: global i32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, K >= 1, KP % 4 == 0, KP >= K, D in {64, 128, 256}
  # tcgen05.mma makes M = 128 rows by N = BN centroids; about 192 KiB of shared memory for every D
  const BM = 128, BN = 128
  const S = 512 / D, XS = 256 / D
  grid (w) over (min(SMS, B * cdiv(N, BM)))
  cta warps 8 occupancy 1
  smem xs: T[XS][BM, D] swizzle 128B
  smem cs: T[S][BN, D] swizzle 128B
  smem csq: f32[S][BN]
  # two accumulators of 128 lanes by BN columns: 256 of the 512 columns
  tmem acc: f32[2][BM, BN]
  # the stages, parities, arrival counts and bytes of all three rings are derived by the compiler; the
  # epilogue takes the x and centroid stages too, so a stage is refilled only after the mma reading it
  # has completed (the epilogue's wait on the accumulator it made)
  pipe xring: producer -> mma, epilogue of xs
  pipe cring: producer -> mma, epilogue of cs, csq
  pipe accs: mma -> epilogue of acc
  role producer warps 0..1:
    let TILES = B * cdiv(N, BM)
    let G = min(SMS, TILES)
    let NC = cdiv(K, BN)
    bar.sync
    for tile in w .. TILES step G:
      let b = tile / cdiv(N, BM)
      let t = tile % cdiv(N, BM)
      pipe.acquire xb <- xring
      tma.load xs[xb] <- x[b, t * BM : +BM, :]
      for kt in 0 .. NC:
        pipe.acquire s <- cring
        tma.load cs[s] <- c[b, kt * BN : +BN, :]
        tma.load csq[s] <- c_sq[b, kt * BN : +BN]
  role mma warps 1..4:
    let TILES = B * cdiv(N, BM)
    let G = min(SMS, TILES)
    let NC = cdiv(K, BN)
    bar.sync
    tcgen05.fence.after
    for tile in w .. TILES step G:
      pipe.wait xb <- xring
      for kt in 0 .. NC:
        pipe.wait s <- cring
        tcgen05.acquire a <- accs
        tcgen05.fence.after
        tcgen05.mma acc[a] <- xs[xb], cs[s]^T, accumulate=0
        tcgen05.commit.stage accs[a]
        pipe.release cring[s]
      pipe.release xring[xb]
  role epilogue warps 4..8:
    reg d: f32[BM, BN] layout rows
    reg bv: f32[BM] layout rows
    reg bi: i32[BM] layout rows
    let TILES = B * cdiv(N, BM)
    let G = min(SMS, TILES)
    let NC = cdiv(K, BN)
    tcgen05.alloc acc
    tcgen05.relinquish
    tcgen05.fence.before
    bar.sync
    tcgen05.fence.after
    for tile in w .. TILES step G:
      let b = tile / cdiv(N, BM)
      let t = tile % cdiv(N, BM)
      fill bv, value=inf
      fill bi, value=-1
      pipe.wait xb <- xring
      for kt in 0 .. NC:
        pipe.wait s <- cring
        pipe.wait a <- accs
        tcgen05.fence.after
        tcgen05.ld d <- acc[a]
        tcgen05.wait.ld d
        tcgen05.fence.before
        pipe.release accs[a]
        argmin.update bv, bi <- d, csq[s], base=kt * BN, scale=-2.0, limit=K
        pipe.release cring[s]
      pipe.release xring[xb]
      store out[b, t * BM : +BM] <- bi, oob=skip
    tcgen05.dealloc acc
