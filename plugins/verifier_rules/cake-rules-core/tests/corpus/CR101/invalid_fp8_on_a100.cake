# target: a100
# A plugin primitive whose features depend on its operand types: converting to fp8 needs `fp8`
# (sm_89+); the same conversion to bf16 needs nothing.
kernel quantize(x: global f32[N, 64], out: global f32[N])
  domain N >= 1
  const R = 128
  grid (t) over (cdiv(N, R))
  cta warps 4
  role all warps 0..4:
    reg s: f32[R] layout rows
    reg q: fp8e4m3[R] layout rows
    reg h: bf16[R] layout rows
    sumsq s <- x[t * R : +R, :], oob=zero
    fixture.cvt q <- s  # expect-error[CR101]
    fixture.cvt h <- s
    store out[t * R : +R] <- s, oob=skip
