# target: h200
# Widths declared by plugin primitives: `fixture.ld` through its `bytes` attribute, `fixture.st`
# through `vector_bytes`. D is a run-time size: at D=9 rows of `x` are 18 bytes apart; 12-byte
# accesses do not exist; rows of 8 + 2 bf16 in `ys` are 20 bytes apart.
kernel widths(x: global bf16[N, D], out: global f32[N])
  domain N >= 1, D >= 8
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  smem ys: bf16[R, 8] pad 2
  role all warps 0..4:
    reg v: bf16[R, 8] layout rows
    reg s: f32[R] layout rows
    fixture.ld v <- x[t * R : +R, 0 : +8], oob=zero  # expect-error[CR106]
    fixture.ld v <- x[t * R : +R, 0 : +8], oob=zero, bytes=12  # expect-error[CR106]
    fixture.st ys <- v  # expect-error[CR106]
    bar.sync
    sumsq s <- ys
    store out[t * R : +R] <- s, oob=skip
