"""Structural hash: candidates that differ only in names, comments or formatting hash alike.

Every declared name (kernels, parameters, sizes and type variables of the domain, constants, grid
and loop variables, lets, buffers, barriers, roles, register tiles) is replaced by its position in
declaration order before hashing; source locations are dropped. Words that name nothing declared
(``oob=zero``, ``inf``, primitive and layout names) are kept as written.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cake_core.ir import nodes as n
from cake_core.convert import converter
from cake_core.ir.types import DTYPE_NAMES


def _declared(kernel: n.Kernel) -> list[str]:
    names: list[str] = []

    def add(x: str) -> None:
        if x not in names and x not in DTYPE_NAMES and x != "self":
            names.append(x)

    for p in kernel.params:
        add(p.name)
        add(p.dtype)
        for e in p.shape:
            for sub in n.walk_expr(e):
                if isinstance(sub, n.Name):
                    add(sub.id)
    for c in kernel.domain:
        add(c.var)
    for c in kernel.consts:
        add(c.name)
    for v in kernel.grid.vars:
        add(v)
    for s in kernel.smem:
        add(s.name)
    for b in kernel.barriers:
        add(b.name)
    for p in kernel.pipes:
        add(p.name)
    for m in kernel.mems:
        add(m.name)
    for r in kernel.roles:
        add(r.name)
        for s in n.walk_stmts(r.body):
            if isinstance(s, (n.Let, n.RegDecl)):
                add(s.name)
            elif isinstance(s, n.Op):  # a name an operation binds (a pipe stage)
                for o in s.outs:
                    if isinstance(o, n.Name):
                        add(o.id)
            elif isinstance(s, n.For):
                add(s.var)
    return names


_RENAMED_KEYS = ("id", "name", "var", "dtype")
_KEPT_KINDS = ("Op", "Call")  # their "name"/"fn" is a primitive or builtin, not a declaration


def _rename(obj: Any, mapping: dict[str, str]) -> Any:
    if isinstance(obj, list):
        return [_rename(x, mapping) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        if key == "loc":
            continue
        if key == "layout" and isinstance(value, dict):
            out[key] = {"name": value["name"], "args": _rename(value["args"], mapping)}
        elif key in _RENAMED_KEYS and isinstance(value, str) and obj.get("kind") not in _KEPT_KINDS:
            out[key] = mapping.get(value, value)
        elif key in ("vars", "args", "producers", "consumers", "buffers") and isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = [mapping.get(v, v) for v in value]
        elif key == "kernel" and isinstance(value, str):
            out[key] = mapping.get(value, value)
        else:
            out[key] = _rename(value, mapping)
    return out


def canonical(module: n.Module) -> dict:
    """The module as a name-free, location-free structure."""
    c = converter()
    kernel_names = {k.name: f"k{i}" for i, k in enumerate(module.kernels)}
    kernels = []
    for k in module.kernels:
        mapping = {name: f"v{i}" for i, name in enumerate(_declared(k))}
        mapping[k.name] = kernel_names[k.name]
        data = c.unstructure(k)
        if not k.pipes:  # a kernel without pipes hashes as it did before pipes existed
            data.pop("pipes", None)
        kernels.append(_rename(data, mapping))
    program = None
    if module.program is not None:
        p = module.program
        names: list[str] = [p.name]
        for prm in p.params:
            names += [prm.name, prm.dtype] + [
                s.id for e in prm.shape for s in n.walk_expr(e) if isinstance(s, n.Name)
            ]
        names += [c_.var for c_ in p.domain] + [b.name for b in p.buffers]
        mapping = {}
        for name in names:
            if name not in mapping and name not in DTYPE_NAMES:
                mapping[name] = f"p{len(mapping)}"
        mapping.update(kernel_names)
        program = _rename(c.unstructure(p), mapping)
    return {"kernels": kernels, "program": program}


def structural_hash(module: n.Module) -> str:
    """A hex SHA-256 of :func:`canonical`; stable across processes and Cake versions of one format."""
    blob = json.dumps(canonical(module), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
