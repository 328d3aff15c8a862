"""Small, checked rewrites of modules: the moves schedule variants and tactics are built from."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n


def set_consts(module: n.Module, values: Mapping[str, int | n.Expr], kernel: str | None = None) -> n.Module:
    """A copy of ``module`` with compile-time constants replaced (``{"BM": 64}``, or an expression).

    Every named constant must exist in the chosen kernel (or, without ``kernel``, in at least one
    kernel); constants of other kernels are left alone.
    """
    remaining = dict(values)
    kernels = []
    for k in module.kernels:
        if kernel is not None and k.name != kernel:
            kernels.append(k)
            continue
        consts = []
        for c in k.consts:
            if c.name in values:
                new = values[c.name]
                new = new if isinstance(new, n.Expr) else n.Num(int(new), loc=c.value.loc)
                consts.append(attrs.evolve(c, value=new))
                remaining.pop(c.name, None)
            else:
                consts.append(c)
        kernels.append(attrs.evolve(k, consts=tuple(consts)))
    if remaining:
        where = f"kernel `{kernel}`" if kernel else "any kernel"
        raise CakeUserError(f"no constant {', '.join(f'`{x}`' for x in sorted(remaining))} in {where}")
    return attrs.evolve(module, kernels=tuple(kernels))
