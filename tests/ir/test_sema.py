"""The type checker's parts (``cake_core.ir.sema``, ``resolve``, ``model``, ``program``) fit together."""

from __future__ import annotations

import ast
import inspect

from cake_core.ir import resolve, sema
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
