# target: a100
# Instances of four warps are meant to be warpgroups; starting at warp 2 they straddle two.
kernel rows(out: global f32[M, 64])
  domain M >= 1
  grid (t) over (cdiv(M, 256))
  cta warps 10
  role lead warps 0..2:
    reg z: f32[64] layout rows
    fill z, value=0.0
  role workers warps 2..10 per 4:  # expect-error[CR109]
    reg v: f32[128, 64] layout rows
    fill v, value=1.0
    store out[t * 256 + self * 128 : +128, :] <- v, oob=skip
