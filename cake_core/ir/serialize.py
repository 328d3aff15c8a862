"""JSON form of Cake IR through cattrs.

All rules live here, never on the nodes. Node kinds in union positions (expressions, indices,
statements) carry a ``"kind"`` tag with the class name. The converter is built on first use.
"""

from __future__ import annotations

import functools
import json

import attrs
import cattrs
from cattrs.strategies import configure_union_passthrough

from cake_core.ir import nodes as n

_ALL = [
    n.Expr, n.Num, n.Name, n.Unary, n.Bin, n.Call, n.Ref, n.Idx, n.At, n.Span, n.All, n.Param,
    n.Constraint, n.Const, n.Grid, n.Cta, n.Smem, n.Barrier, n.Layout, n.Stmt, n.Attr, n.Op, n.Let,
    n.RegDecl, n.For, n.If, n.Role, n.Kernel, n.Buffer, n.Launch, n.Program, n.Module,
]  # fmt: skip
FORMAT_VERSION = 1


@functools.cache
def converter() -> cattrs.Converter:
    from cake_core.location import Loc

    attrs.resolve_types(Loc)
    for cls in _ALL:
        attrs.resolve_types(cls, globals(), vars(n))
    c = cattrs.Converter(forbid_extra_keys=True)
    configure_union_passthrough(int | float | str | bool | None, c)

    # Expressions hold indices and indices hold expressions, so the tag is resolved when a value is
    # (un)structured, not when hooks are generated.
    for base in (n.Expr, n.Idx, n.Stmt):
        kinds = {cls.__name__: cls for cls in _ALL if issubclass(cls, base) and cls is not base}

        def is_kind(t: object, _base: type = base) -> bool:
            return isinstance(t, type) and issubclass(t, _base)

        def unstructure(obj: object) -> dict:
            return {"kind": type(obj).__name__, **c.unstructure_attrs_asdict(obj)}

        def structure(data: dict, _t: type, _kinds: dict = kinds) -> object:
            data = dict(data)
            kind = data.pop("kind", None)
            if kind not in _kinds:
                raise ValueError(f"unknown node kind {kind!r}")
            return c.structure_attrs_fromdict(data, _kinds[kind])

        c.register_unstructure_hook_func(is_kind, unstructure)
        c.register_structure_hook_func(is_kind, structure)
    return c


def to_dict(module: n.Module) -> dict:
    return {"format": FORMAT_VERSION, "path": module.path, "module": converter().unstructure(module)}


def from_dict(data: dict) -> n.Module:
    if data.get("format") != FORMAT_VERSION:
        raise ValueError(f"unsupported Cake IR JSON format {data.get('format')!r}")
    m = converter().structure(data["module"], n.Module)
    return attrs.evolve(m, path=data.get("path", "<json>"))


def to_json(module: n.Module) -> str:
    return json.dumps(to_dict(module), indent=1)


def from_json(text: str) -> n.Module:
    return from_dict(json.loads(text))
