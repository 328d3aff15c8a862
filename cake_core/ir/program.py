"""Program binding: each launch's arguments matched to its kernel's parameters, and the kernel
specialization a program specialization selects."""

from __future__ import annotations

from collections.abc import Mapping

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.ir.model import LaunchModel, Spec
from cake_core.ir.types import DTYPE_NAMES
from cake_core.location import Loc


def bind_program(module: n.Module) -> tuple[list[LaunchModel], list[Diagnostic]]:
    """Match each launch's arguments to its kernel's parameters, binding the kernel's sizes."""
    prog = module.entry
    diags: list[Diagnostic] = []
    tensors: dict[str, tuple[str, tuple[n.Expr, ...], Loc]] = {}
    scalars = {p.name for p in prog.params if p.tier == "scalar"}
    for p in prog.params:
        tensors[p.name] = (p.dtype, p.shape, p.loc)
    names = {k.name for k in module.kernels}
    if len(names) != len(module.kernels):
        diags.append(codes.DUPLICATE_NAME.at(prog.loc, "two kernels of the module share a name"))
    for b in prog.buffers:
        if b.name in tensors:
            diags.append(codes.DUPLICATE_NAME.at(b.loc, f"`{b.name}` is declared twice in the program"))
        tensors[b.name] = (b.dtype, b.shape, b.loc)
    out = []
    for launch in prog.launches:
        k = module.kernel(launch.kernel)
        if k is None:
            diags.append(codes.LAUNCH.at(launch.loc, f"no kernel `{launch.kernel}` in this module"))
            continue
        if len(launch.args) != len(k.params):
            diags.append(
                codes.LAUNCH.at(
                    launch.loc, f"`{k.name}` takes {len(k.params)} argument(s), the launch passes {len(launch.args)}",
                    secondary=(Label(k.loc, "kernel declared here"),),
                )
            )  # fmt: skip
            continue
        sizes: dict[str, n.Expr] = {}
        types: dict[str, str] = {}
        for arg, p in zip(launch.args, k.params):  # as many: checked above
            if arg not in tensors:
                diags.append(codes.LAUNCH.at(launch.loc, f"`{arg}` is not a parameter or buffer of the program"))
                continue
            dtype, shape, _ = tensors[arg]
            if (p.tier == "scalar") != (arg in scalars):
                diags.append(
                    codes.LAUNCH.at(launch.loc, f"`{arg}` is {'a scalar' if arg in scalars else 'a tensor'}, "
                                    f"parameter `{p.name}` of `{k.name}` takes "
                                    f"{'a scalar' if p.tier == 'scalar' else 'a tensor'}",
                                    secondary=(Label(p.loc, "parameter"),))
                )  # fmt: skip
                continue
            if len(shape) != len(p.shape):
                diags.append(
                    codes.LAUNCH.at(launch.loc, f"`{arg}` has rank {len(shape)}, parameter `{p.name}` of "
                                    f"`{k.name}` rank {len(p.shape)}", secondary=(Label(p.loc, "parameter"),))
                )  # fmt: skip
                continue
            if p.dtype in DTYPE_NAMES:
                if p.dtype != dtype:
                    diags.append(
                        codes.LAUNCH.at(launch.loc, f"`{arg}` holds `{dtype}`, parameter `{p.name}` of "
                                        f"`{k.name}` takes `{p.dtype}`", secondary=(Label(p.loc, "parameter"),))
                    )  # fmt: skip
            elif types.setdefault(p.dtype, dtype) != dtype:
                diags.append(codes.LAUNCH.at(launch.loc, f"type variable `{p.dtype}` bound to two element types"))
            for dim, pe in zip(shape, p.shape):  # as many: checked above
                if isinstance(pe, n.Name):
                    prior = sizes.setdefault(pe.id, dim)
                    if prior is not dim and prior != dim:
                        diags.append(
                            codes.LAUNCH.at(launch.loc, f"size `{pe.id}` of `{k.name}` is bound to two "
                                            f"different program sizes")
                        )  # fmt: skip
        out.append(LaunchModel(launch, k, sizes, types))
    return out, diags


def kernel_spec(lm: LaunchModel, program_spec: Mapping[str, int | str]) -> Spec | None:
    """The kernel specialization a program specialization selects, or None if the kernel has none."""
    values = []
    for c in lm.kernel.domain:
        if c.op != "in":
            continue
        if c.var in lm.types:
            v: int | str | None = lm.types[c.var]
            v = program_spec.get(v, v) if isinstance(v, str) else v
        elif c.var in lm.sizes:
            v = try_int(lm.sizes[c.var], program_spec)
        else:
            v = None
        if v is None:
            return None
        values.append((c.var, v))
    return Spec(tuple(values))
