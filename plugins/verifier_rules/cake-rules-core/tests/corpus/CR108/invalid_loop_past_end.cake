# target: a100
# One iteration too many: row K of `c` does not exist. `fixture.ld` is a plugin primitive; the rule
# sees its read through its declared effects. The second loop's guard is off by one.
kernel scan(c: global f32[K, 64], out: global f32[K])
  domain K >= 1
  grid (b) over (1)
  cta warps 1
  role all warps 0..1:
    reg w: f32[1, 64] layout rows
    reg s: f32[1] layout rows
    for k in 0 .. K + 1:
      fixture.ld w <- c[k : +1, :]  # expect-error[CR108]
    for j in 0 .. 2 * K:
      if j <= K:
        sumsq s <- c[j : +1, :]  # expect-error[CR108]
        store out[j : +1] <- s, oob=skip
