"""Every size a diagnostic quotes (``when K=1, KP=4``, ``seen at B=1, N=512``) satisfies every clause of
its kernel's domain, relations between two sizes (``KP >= K``) included.

A table of kernels with findings whose witnesses involve related sizes: the Hopper schedule with
planted bugs (a bounds finding on ``c_sq``, whose extent ``KP`` the domain keeps at least ``K``; a
protocol finding simulated at grown sizes), and small kernels whose domains relate their sizes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cake_core import cli
from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate
from cake_core.ir.parser import parse
from cake_core.verify.runner import verify_source

SCHEDULE = (Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules" / "explicit" / "hopper.cake").read_text()
QUOTED = re.compile(r"(?:when|seen at) ((?:[A-Za-z_]\w*=-?\d+(?:, )?)+)")

SMALL = """\
# target: h200
kernel k(x: global f32[N], y: global f32[M], out: global f32[N])
  domain N >= 1, M >= N, M % 4 == 0, M <= 4 * N
  grid (t) over (cdiv(M, 128))
  cta warps 4
  role all warps 0..4:
    reg v: f32[128] layout rows
    store out[t * 128 : +128] <- v
"""

DIVIDES = """\
# target: h200
kernel k(x: global f32[K, N], out: global f32[M])
  domain K >= 2, N >= 1, N % K == 0, M >= N
  grid (t) over (cdiv(N, K))
  cta warps 4
  role all warps 0..4:
    reg v: f32[128] layout rows
    store out[t * K : +128] <- v
"""

CASES = {
    # the norms kernel stores a whole tile of c_sq rows unmasked: out of bounds where KP < 128
    "hopper-norms-unmasked": SCHEDULE.replace("store c_sq[b, t * R : +R] <- s, oob=skip",
                                              "store c_sq[b, t * R : +R] <- s"),
    # a protocol finding, seen at grown sizes, in a kernel whose domain says KP >= K and KP % 4 == 0
    "hopper-no-empty-wait": SCHEDULE.replace("        mbarrier.wait cempty[s], parity=(g / S + 1) % 2\n", ""),
    "related-bounds": SMALL,
    "related-divisor": DIVIDES,
}  # fmt: skip


def _kernel_at(module: n.Module, line: int) -> n.Kernel:
    """The kernel whose text holds ``line``."""
    kernels = [k for k in module.kernels if k.loc.line <= line]
    return max(kernels, key=lambda k: k.loc.line)


def _broken(kernel: n.Kernel, sizes: dict[str, int]) -> list[str]:
    """The clauses of the kernel's domain that the quoted sizes break (clauses naming a size that is not
    quoted cannot be checked, and are not)."""
    env: dict[str, object] = dict(sizes)
    out = []
    for c in kernel.domain:
        if c.op == "in" or c.var not in sizes:
            continue
        try:
            bound = evaluate(c.values[0], env)
        except EvalError:
            continue
        v = sizes[c.var]
        ok = v >= bound if c.op == ">=" else v <= bound if c.op == "<=" else bound != 0 and v % bound == 0
        if not ok:
            out.append(f"{c.var} {c.op} {bound}")
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_quoted_sizes_satisfy_the_domain(pack_registry, case: str) -> None:
    text = CASES[case]
    module = parse(text, f"{case}.cake")
    report = verify_source(text, f"{case}.cake", pack_registry.get("targets", "h200"), pack_registry)
    quoted = 0
    for d in report.diagnostics:
        for m in QUOTED.finditer(d.message):
            sizes = {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split(", "))}
            kernel = _kernel_at(module, d.primary.line)
            sizes = {k: v for k, v in sizes.items() if k in {c.var for c in kernel.domain}}
            assert not _broken(kernel, sizes), (d.message, _broken(kernel, sizes))
            quoted += len(sizes) > 1
    assert quoted, [d.message for d in report.diagnostics]  # the case quotes related sizes


def test_the_bounds_note_states_the_relations(pack_registry) -> None:
    text = CASES["hopper-norms-unmasked"]
    report = verify_source(text, "norms.cake", pack_registry.get("targets", "h200"), pack_registry)
    (d,) = [d for d in report.diagnostics if d.code == "CR108"]
    assert "when K=1, KP=1 (at t=0)" in d.message
    assert d.notes == ("the run-time domain is: B >= 1; K >= 1; KP >= 0; KP >= K",)
