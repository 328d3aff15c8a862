"""What every tactic shares: whether a rewritten module still fits (the precondition's common part), the
applications offered on that ground, and the edit of one kernel of a module.

A rewrite is offered only where the rewritten module type-checks for the target with the registered
primitives and layouts (tiles fit their layouts, copies match), every kernel specialization's shared
memory fits what the target grants one block, every division among compile-time values in the kernel
(``KC = D / BK``, ``BK / 16``) stays exact and at least 1 for every specialization (a tile that no longer
divides the domain's sizes would compute something else), and the verifier's rules for the target find
no error (registers per thread, threads per block, races, the pipe protocol). The cheap checks run
first, so the verifier runs only on rewrites that could pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import attrs

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int

if TYPE_CHECKING:
    from cake_core.ir.model import CheckedModule
    from cake_core.loop.tactic import Application, Tactic
    from cake_core.target import Target


def expressions(node: object) -> Iterator[n.Expr]:
    """Every expression in ``node`` (a kernel, a statement, ...), each sub-expression included."""
    if isinstance(node, n.Expr):
        yield from n.walk_expr(node)
    elif isinstance(node, tuple):
        for x in node:
            yield from expressions(x)
    elif attrs.has(type(node)):
        for f in attrs.fields(type(node)):
            if f.name != "loc":
                yield from expressions(getattr(node, f.name))


def names_in(node: object) -> set[str]:
    """The names ``node``'s expressions use."""
    return {e.id for e in expressions(node) if isinstance(e, n.Name)}


def reach(kernel: n.Kernel, names: set[str]) -> set[str]:
    """``names`` and every name the kernel's constants among them use, transitively (``KC = D / BK``:
    naming ``KC`` names ``BK`` and ``D``)."""
    values = {c.name: c.value for c in kernel.consts}
    out, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            if name in values:
                todo += names_in(values[name])
    return out


def literal_consts(kernel: n.Kernel) -> dict[str, int]:
    """The kernel's constants whose value is a positive integer literal (``const BM = 128``)."""
    return {
        c.name: c.value.value
        for c in kernel.consts
        if isinstance(c.value, n.Num) and type(c.value.value) is int and c.value.value > 0
    }


def checked(module: n.Module, target: Target) -> CheckedModule | None:
    """``module`` type-checked for ``target`` with the process registry, or ``None`` where it has errors."""
    from cake_core import plugins
    from cake_core.verify.runner import check_registered

    try:
        result = check_registered(module, target, plugins.registry())
    except (DiagnosticError, CakeUserError):
        return None
    if any(d.is_error for d in result.diagnostics):
        return None
    if any(d.is_error for m in result.models.values() for d in m.diagnostics):
        return None
    return result


def fits(module: n.Module, target: Target) -> bool:
    """The shared precondition: ``module`` type-checks for ``target``, its shared memory fits one block
    of ``target``, its compile-time divisions are exact and the verifier finds no error (see the module
    docstring)."""
    from cake_core import plugins
    from cake_core.verify.runner import verify

    result = checked(module, target)
    if result is None:
        return False
    kernels = {k.name: k for k in module.kernels}
    for (name, _spec), model in result.models.items():
        if model.smem_bytes > target.smem_per_block_optin:
            return False
        for e in expressions(kernels[name]):
            if isinstance(e, n.Bin) and e.op == "/":
                a, b = try_int(e.left, model.env), try_int(e.right, model.env)
                if a is not None and b is not None and (b <= 0 or a % b or a < b):
                    return False
    return verify(result, target, plugins.registry()).ok


def offered(
    tactic: Tactic, module: n.Module, target: Target, candidates: Iterable[Application], *, until_refused: bool = False
) -> list[Application]:
    """The ``candidates`` whose rewrite of ``module`` fits, in their order; with ``until_refused``, none after
    the first that does not (a ladder whose next rungs only need more)."""
    out = []
    for app in candidates:
        if fits(tactic.apply(module, target, app), target):
            out.append(app)
        elif until_refused:
            break
    return out


def with_kernel(module: n.Module, name: str, edit: Callable[[n.Kernel], n.Kernel]) -> n.Module:
    """``module`` with its kernel ``name`` replaced by ``edit(kernel)``."""
    return attrs.evolve(module, kernels=tuple(edit(k) if k.name == name else k for k in module.kernels))
