"""Primitives the corpus uses to show that rules check primitives they have never seen.

Registered in-process (``plugins.load(extra=[this module])``), never installed. Each stands for a kind
of primitive a plugin may bring; the rules know them only through the primitive contract:

* ``fixture.cvt`` needs the ``fp8`` feature only when an operand is an fp8 type (``features(op)``
  depends on the typed operands — CR101);
* ``fixture.ld`` is a vectorized global load whose width is a compile-time ``bytes`` attribute, with an
  optional bounds mask (CR106, CR108 through its declared effects);
* ``fixture.st`` is a shared-memory store that declares its vector width through ``vector_bytes``
  (CR106);
* ``fixture.bulk_store`` is a bulk tensor store (shared -> global through the async proxy, like TMA's
  ``cp.async.bulk.tensor`` store): CR117 finds the proxy fence its generic-proxy writers need, CR118
  checks its tensor map, knowing it only by its declared effects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cake_core.hookspecs import hookimpl
from cake_core.ir.primitive import Access, AttrSpec, Kind, Primitive, Signature, Slot, TypedOp
from cake_core.ir.types import DType
from cake_core.target import Feature

FP8 = frozenset({DType.FP8E4M3, DType.FP8E5M2})


class FixtureConvert(Primitive):
    name = "fixture.cvt"
    summary = "convert a register tile to another element type"
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("src", {Kind.REGISTERS})],
    )

    def features(self, op: TypedOp) -> frozenset[Feature]:
        if any(o.dtype in FP8 for o in op.outs + op.ins):
            return frozenset({Feature.FP8})
        return frozenset()


class FixtureVectorLoad(Primitive):
    name = "fixture.ld"
    summary = "load a global tile into registers, `bytes` per thread per access"
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("src", {Kind.GLOBAL}, Access.READ, mask_attr="oob")],
        attrs=[
            AttrSpec("oob", "word", choices=("zero", "none")),
            AttrSpec("bytes", "const", default=16, doc="bytes per thread per access"),
        ],
    )


class FixtureSharedStore(Primitive):
    name = "fixture.st"
    summary = "store a register tile to shared memory with 16-byte vector stores"
    signature = Signature(
        outs=[Slot("dst", {Kind.SHARED}, Access.WRITE)],
        ins=[Slot("src", {Kind.REGISTERS})],
    )

    def vector_bytes(self, op: TypedOp) -> Mapping[str, int]:
        return {"dst": 16}


class FixtureBulkStore(Primitive):
    name = "fixture.bulk_store"
    summary = "copy a shared tile to a global tensor through the async proxy (a bulk tensor store)"
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL}, Access.WRITE, async_proxy=True, asynchronous=True, masked_always=True)],
        ins=[Slot("src", {Kind.SHARED}, Access.READ, async_proxy=True, asynchronous=True)],
    )


@hookimpl
def cake_register_primitives(register: Callable[[Primitive], None]) -> None:
    for cls in (FixtureConvert, FixtureVectorLoad, FixtureSharedStore, FixtureBulkStore):
        register(cls())
