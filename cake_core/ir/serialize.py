"""The versioned JSON form of a Cake IR module: the envelope around the one converter's data.

How nodes become data (tagged unions for expressions, indices and statements) is a rule of
:mod:`cake_core.convert`; this module adds the format version and the module's path.
"""

from __future__ import annotations

import json

import attrs

from cake_core.convert import converter
from cake_core.ir import nodes as n

FORMAT_VERSION = 1


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
