# target: h200
# Two warpgroups each take half of a CTA's 256 rows, but the store's row start forgets `self`: both
# instances store rows 0..127 of the tile (and rows 128..255 stay unwritten).
kernel norms(x: global T[B, N, D], out: global f32[B, N])
  domain T in {bf16, f16}, B >= 1, N >= 1, D in {64, 128}
  const BM = 256, ROWS = 128
  grid (t, b) over (cdiv(N, BM), B)  # expect-error[CR129]
  cta warps 8
  role halves warps 0..8 per 4:
    reg s: f32[ROWS, 1] layout rows
    sumsq s <- x[b, t * BM + self * ROWS : +ROWS, :], oob=zero
    store out[b, t * BM : +ROWS] <- s, oob=skip  # expect-error[CR130]
