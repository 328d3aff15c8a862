"""The one cattrs converter: how every record becomes JSON-ready data, and back where it is read back.

All serialization rules live here, never on the records. The converter is built on first use, after
plugins have loaded; a record without a rule here unstructures field by field (``attrs`` order, enums
as their values, tuples as lists). The rules:

* a set is a sorted list; a source location is an object of its five fields;
* IR nodes in union positions (expressions, indices, statements) carry a ``"kind"`` tag with the
  class name (:mod:`cake_core.ir.serialize` wraps a module in its versioned envelope);
* a diagnostic is the flat form of DESIGN.md section 6 (``code``, ``slug``, ``severity``,
  ``message``, ``file``, ``line``, ``column``, ``end_line``, ``end_column``, ``label``, ``secondary``,
  ``plugin``, ``notes``, ``help``), and is read back from it;
* a compile result leaves out the cubin and PTX (their size and SHA-256 instead), a run result its
  output arrays (their shapes and dtypes instead); a device adds its ``arch``; ptxas's constant
  banks are keyed by strings;
* a mutant's outcome is flattened; a ``cake run`` entry leaves out the pipeline products it holds.
"""

from __future__ import annotations

import collections.abc
import functools
import hashlib
import json
import typing
from collections.abc import Callable
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.strategies import configure_union_passthrough

from cake_core.location import Loc


@functools.cache
def converter() -> cattrs.Converter:
    c = cattrs.Converter(forbid_extra_keys=True)
    configure_union_passthrough(int | float | str | bool | None, c)
    c.register_unstructure_hook_func(_is_set, lambda s: sorted(c.unstructure(x) for x in s))
    c.register_unstructure_hook(Loc, lambda loc: loc._asdict())
    c.register_structure_hook(Loc, lambda d, _t: Loc(**d))
    _ir_rules(c)
    _diagnostic_rules(c)
    _runtime_rules(c)
    _loop_rules(c)
    return c


def unstructure(obj: object) -> Any:
    """``obj`` as JSON-ready data (dicts, lists, strings, numbers)."""
    return converter().unstructure(obj)


def structure(data: object, cls: type) -> Any:
    """The record of type ``cls`` that ``data`` (as :func:`unstructure` made it) describes."""
    return converter().structure(data, cls)


def dumps(obj: object, indent: int = 2) -> str:
    """``obj`` as an indented JSON document (no trailing newline)."""
    return json.dumps(unstructure(obj), indent=indent)


# ---------------------------------------------------------------------------------------------------
# rules
# ---------------------------------------------------------------------------------------------------


def _is_set(t: object) -> bool:
    return (typing.get_origin(t) or t) in (set, frozenset, collections.abc.Set)


def _ir_rules(c: cattrs.Converter) -> None:
    """IR nodes in union positions carry their class name as ``"kind"``. The node classes are known by
    their module (``cake_core.ir.nodes``), not imported: the IR's own modules (serialization, structural
    hash) use this converter, so it must not depend on them. A union's members are its base's subclasses;
    the tag is resolved when a value is (un)structured, since expressions hold indices and indices hold
    expressions."""
    import sys

    def node_class(t: object) -> bool:
        return isinstance(t, type) and t.__module__ == "cake_core.ir.nodes" and attrs.has(t)

    def union_base(t: type) -> type | None:
        for base in t.__mro__:
            if node_class(base) and base.__name__ in ("Expr", "Idx", "Stmt"):
                return base
        return None

    def kinds(base: type) -> dict[str, type]:
        out: dict[str, type] = {}
        todo = list(base.__subclasses__())
        while todo:
            cls = todo.pop()
            out[cls.__name__] = cls
            todo += cls.__subclasses__()
        return out

    def resolved(cls: type) -> type:
        return attrs.resolve_types(cls, vars(sys.modules[cls.__module__]), vars(sys.modules[cls.__module__]))

    def is_kind(t: object) -> bool:
        return node_class(t) and union_base(t) is not None  # type: ignore[arg-type]

    def unstructure_node(obj: object) -> dict:
        resolved(type(obj))
        return {"kind": type(obj).__name__, **c.unstructure_attrs_asdict(obj)}

    def structure_node(data: dict, t: type) -> object:
        data = dict(data)
        kind = data.pop("kind", None)
        known = kinds(union_base(t))  # type: ignore[arg-type]
        if kind not in known:
            raise ValueError(f"unknown node kind {kind!r}")
        return c.structure_attrs_fromdict(data, resolved(known[kind]))

    c.register_unstructure_hook_func(is_kind, unstructure_node)
    c.register_structure_hook_func(is_kind, structure_node)
    # the other nodes (a kernel, a role, ...) are plain records once their annotations are resolved
    c.register_unstructure_hook_factory(
        lambda t: node_class(t) and not is_kind(t), lambda cls: make_dict_unstructure_fn(resolved(cls), c)
    )
    c.register_structure_hook_factory(
        lambda t: node_class(t) and not is_kind(t), lambda cls: make_dict_structure_fn(resolved(cls), c)
    )


def _diagnostic_rules(c: cattrs.Converter) -> None:
    from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity

    def span(loc: Loc) -> dict[str, Any]:
        return {"file": loc.file, "line": loc.line, "column": loc.col, "end_line": loc.end_line,
                "end_column": loc.end_col}  # fmt: skip

    def loc_of(d: dict[str, Any]) -> Loc:
        return Loc(d["file"], d["line"], d["column"], d["end_line"], d["end_column"])

    def unstructure_diagnostic(d: Diagnostic) -> dict[str, Any]:
        return {
            "code": d.code, "slug": d.slug, "severity": d.severity.value, "message": d.message, **span(d.primary),
            "label": d.label, "secondary": [{**span(s.loc), "message": s.message} for s in d.secondary],
            "plugin": d.plugin, "notes": list(d.notes), "help": d.help,
        }  # fmt: skip

    def structure_diagnostic(d: dict[str, Any], _t: type) -> Diagnostic:
        return Diagnostic(
            d["code"], d["slug"], Severity(d["severity"]), d["message"], loc_of(d), d["label"],
            tuple(Label(loc_of(s), s["message"]) for s in d["secondary"]), tuple(d["notes"]), d["help"], d["plugin"],
        )  # fmt: skip

    def is_diagnostic(t: object) -> bool:
        return isinstance(t, type) and issubclass(t, Diagnostic)

    c.register_unstructure_hook_func(is_diagnostic, unstructure_diagnostic)
    c.register_structure_hook_func(is_diagnostic, structure_diagnostic)


def _record(qualified: str) -> Callable[[object], bool]:
    """Whether a type is the record ``module.Name``, known by name: a rule for it is made when a value
    of it is first (un)structured, so that building the converter imports none of the modules."""
    module, _, name = qualified.rpartition(".")

    def matches(t: object) -> bool:
        return isinstance(t, type) and t.__module__ == module and t.__qualname__ == name

    return matches


def _runtime_rules(c: cattrs.Converter) -> None:
    def resources(cls: type) -> Callable[[Any], dict[str, Any]]:
        plain = make_dict_unstructure_fn(attrs.resolve_types(cls), c)
        return lambda r: {**plain(r), "constant": {str(k): v for k, v in r.constant.items()}}

    def device(cls: type) -> Callable[[Any], dict[str, Any]]:
        plain = make_dict_unstructure_fn(attrs.resolve_types(cls), c)
        return lambda info: {**plain(info), "arch": info.arch}

    def compiled(cls: type) -> Callable[[Any], dict[str, Any]]:
        return lambda r: {
            "name": r.name, "arch": r.arch, "options": list(r.options), "cubin_bytes": len(r.cubin),
            "cubin_sha256": hashlib.sha256(r.cubin).hexdigest(), "nvrtc_version": list(r.nvrtc_version),
            "compile_s": r.compile_s, "wall_s": r.wall_s, "cache_status": r.cache_status, "cache_key": r.cache_key,
            "functions": c.unstructure(r.functions), "warnings": c.unstructure(r.warnings),
            "global_bytes": r.global_bytes, "log": r.log,
        }  # fmt: skip

    def run_result(cls: type) -> Callable[[Any], dict[str, Any]]:
        plain = make_dict_unstructure_fn(attrs.resolve_types(cls), c, outputs=override(omit=True))

        def unstructure_run(r: Any) -> dict[str, Any]:
            outputs = {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in r.outputs.items()}
            d = plain(r)
            return {"status": d.pop("status"), "plan": d.pop("plan"), "error": d.pop("error"), "outputs": outputs,
                    **d}  # fmt: skip

        return unstructure_run

    c.register_unstructure_hook_factory(_record("cake_core.runtime.ptxas.FunctionResources"), resources)
    c.register_unstructure_hook_factory(_record("cake_core.runtime.device.DeviceInfo"), device)
    c.register_unstructure_hook_factory(_record("cake_core.runtime.nvrtc.CompileResult"), compiled)
    c.register_unstructure_hook_factory(_record("cake_core.runtime.worker.RunResult"), run_result)


def _loop_rules(c: cattrs.Converter) -> None:
    def outcome(cls: type) -> Callable[[Any], dict[str, Any]]:
        return lambda o: {
            "operator": o.mutant.operator, "file": o.file, "kernel": o.mutant.kernel, "line": o.mutant.loc.line,
            "column": o.mutant.loc.col, "description": o.mutant.description, "fate": o.fate.value,
            "detail": o.detail, "warnings": list(o.warnings),
        }  # fmt: skip

    c.register_unstructure_hook_factory(_record("cake_core.mutate.pipeline.Outcome"), outcome)
