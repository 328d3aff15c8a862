"""The type checker's parts (``cake_core.ir.sema``, ``resolve``, ``model``, ``program``) fit together."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from cake_core.ir import resolve, sema
from cake_core.problems import kmeans_assign
from cake_core.ir.parser import parse

KERNEL = """\
kernel k(x: global f32[N, D], out: global f32[N, D])
  domain N >= 1, D in {32, 64}
  grid (t) over (cdiv(N, 64))
  cta warps 4
  role all warps 0..4:
    let half = D / 2
    reg acc: f32[64, D] layout rows
    for i in 0 .. 2:
      store out[t * 64 : +64, :] <- acc, oob=skip
"""


def test_every_step_the_resolver_records_names_a_checker_method() -> None:
    """Steps name :class:`KernelChecker` methods by string (resolve does not import sema): every name
    written in resolve.py must be one."""
    tree = ast.parse(inspect.getsource(resolve))
    names = {
        node.elts[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Tuple) and node.elts and isinstance(node.elts[0], ast.Constant)
        and node.elts[0].value in {"report", "let", "reg", "attribute", "op"}
    }  # fmt: skip
    assert names == {"report", "let", "reg", "attribute", "op"}
    assert all(inspect.isfunction(getattr(sema.KernelChecker, name)) for name in names)


def test_specializations_share_one_resolution(primitives: dict) -> None:
    checked = sema.check_module(parse(KERNEL, "k.cake"), primitives)
    assert checked.ok, checked.diagnostics
    a, b = checked.kernel_models("k")
    assert (a.spec.label, b.spec.label) == ("D=32", "D=64")
    assert a.env["half"] == 16 and b.env["half"] == 32
    assert [t.prim.name for t in a.ops] == ["store"]
    assert (a.regs["acc"].layout.regs_per_thread, b.regs["acc"].layout.regs_per_thread) == (32, 64)


def test_a_declaration_of_a_built_in_word_or_twice_is_reported(primitives: dict) -> None:
    text = KERNEL.replace("let half = D / 2", "let inf = 1\n    let i = 2")
    messages = [d.message for d in sema.check_module(parse(text, "k.cake"), primitives).diagnostics]
    assert messages == [
        "`inf` is a built-in constant (inf); it cannot name a let",
        "`i` is declared twice in kernel `k`",
    ]


# -- CK010: a layout that fits another instance size says which ---------------------------------------

HOPPER = Path(kmeans_assign.__file__).parent / "schedules" / "hopper.cake"
WHOLE = "role consumers warps 4..4 + 4 * WG per 4 regs 232:"


def _layout_errors(primitives: dict, text: str) -> list:
    checked = sema.check_module(parse(text, "k.cake"), primitives)
    return [d for d in checked.diagnostics if d.code == "CK010"]


def test_ck010_suggests_per_4_where_a_warpgroup_role_is_one_instance_too_large(primitives: dict) -> None:
    text = HOPPER.read_text()
    assert WHOLE in text
    errors = _layout_errors(primitives, text.replace(" per 4 regs", " regs"))
    assert [(d.primary.line, d.message.split(" belongs")[0]) for d in errors] == [
        (54, "`wgmma_acc`"), (55, "`wgmma_rows`"), (56, "`wgmma_rows`"),
    ]  # fmt: skip
    for d in errors:
        assert d.help == (
            "split role `consumers` into 2 instances of 4 warps: write `per 4` after its warp range (`self` "
            "numbers the instances; each holds its own tile)"
        )
        ((role, label),) = [(s.loc.line, s.message) for s in d.secondary]
        assert (role, label) == (53, "role `consumers` is one instance of 8 warps")
    # as written, the schedule checks clean
    assert _layout_errors(primitives, text) == []


def test_ck010_suggests_the_per_that_fits_in_place_of_the_written_one(primitives: dict) -> None:
    text = HOPPER.read_text().replace(WHOLE, "role consumers warps 4..4 + 4 * WG per 8 regs 232:")
    (d, *_) = _layout_errors(primitives, text)
    assert d.help is not None and "into 2 instances of 4 warps: write `per 4`, not `per 8`" in d.help
    assert d.secondary[0].message == "role `consumers` is one instance of 8 warps"
    # a warp grid of four warps in a role of 8 fits instances of 4 too
    grid = KERNEL.replace("cta warps 4", "cta warps 8").replace("warps 0..4", "warps 0..8")
    grid = grid.replace("reg acc: f32[64, D] layout rows", "reg acc: f32[64, D] layout mma_acc(2, 2)")
    (d,) = _layout_errors(primitives, grid)
    assert d.message.startswith("`mma_acc(2, 2)` covers 4 warps, but the role instance has 8")
    assert d.help is not None and "split role `all` into 2 instances of 4 warps: write `per 4`" in d.help


def test_ck010_without_an_instance_size_that_fits_gives_no_help(primitives: dict) -> None:
    # 48 rows are no multiple of 64 at any instance size: no `per` would fix it
    text = KERNEL.replace("reg acc: f32[64, D] layout rows", "reg acc: f32[48, D] layout wgmma_acc")
    (d, *_) = _layout_errors(primitives, text)
    assert d.message.startswith("`wgmma_acc` holds [M, N]") and d.help is None and d.secondary == ()
