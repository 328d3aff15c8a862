"""Per-kernel facts every verifier rule reads, computed in one pass over the operations and cached.

A rule that calls ``typed.prim.effects(typed)`` for every operation, and again for every question it
asks, repeats the same work once per rule; the verifier runs a dozen rules over every
specialization. :func:`facts` walks a kernel model's operations once and keeps what rules look up:
each operation's declared effects and target features, the barrier actions on every barrier, the
accesses to every shared buffer, and which primitives fence the async proxy. The result is kept in
the analyses of the model's checked module (:mod:`cake_core.verify.analyses`) under ``"facts"``.

Primitive traits read here, all declared on :class:`~cake_core.ir.primitive.Primitive` (False unless
a primitive sets them):

* ``proxy_fence = True`` on a primitive with no operands: it orders the issuing thread's
  generic-proxy shared-memory writes before its later async-proxy accesses
  (``fence.proxy.async.shared::cta``; the core's ``fence.proxy_async``);
* ``warpgroup = True``: every execution is issued by one whole warpgroup (four consecutive warps
  starting at a multiple of four): the core's ``wgmma`` family;
* ``swizzle_aware = True``: its generic-proxy shared-memory accesses compute swizzled addresses
  themselves (the core's generic accesses assume unswizzled rows).
"""

from __future__ import annotations

from collections import defaultdict

import attrs

from cake_core.ir.primitive import Access, BarrierAction, Effect, Kind, Primitive, is_warpgroup_wide
from cake_core.ir.model import KernelModel, RoleInfo, TypedOpImpl
from cake_core.target import Feature
from cake_core.verify.analyses import for_model

__all__ = ["KernelFacts", "OpFacts", "facts", "is_proxy_fence", "is_warpgroup_wide", "swizzle_aware"]


def is_proxy_fence(prim: Primitive) -> bool:
    """Whether ``prim`` is an async-proxy fence: ``proxy_fence = True`` and no operands."""
    sig = prim.signature
    return prim.proxy_fence is True and not sig.outs and not sig.ins


def swizzle_aware(prim: Primitive) -> bool:
    """Whether the primitive's generic-proxy shared accesses handle a buffer's swizzle themselves."""
    return prim.swizzle_aware is True


@attrs.define(eq=False, slots=True)
class OpFacts:
    """One typed operation with its declared effects and the features it needs."""

    typed: TypedOpImpl
    effects: tuple[Effect, ...]
    features: frozenset[Feature]

    @property
    def prim(self) -> Primitive:
        return self.typed.prim

    @property
    def role(self) -> RoleInfo:
        return self.typed.role

    @property
    def barrier_effects(self) -> tuple[Effect, ...]:
        return tuple(e for e in self.effects if e.tier is Kind.BARRIER and e.barrier is not None)

    @property
    def shared_effects(self) -> tuple[Effect, ...]:
        """Accesses (reads or writes) of shared buffers."""
        return tuple(
            e for e in self.effects if e.tier is Kind.SHARED and e.access is not Access.NONE and e.operand.name
        )


@attrs.define(eq=False)
class KernelFacts:
    """What the rules of one kernel model look up, indexed once."""

    model: KernelModel
    ops: list[OpFacts]
    by_op: dict[int, OpFacts]
    #: barrier name -> every (operation, effect) with a barrier action on it, in source order
    barrier_actions: dict[str, list[tuple[OpFacts, Effect]]]
    #: shared buffer name -> every (operation, effect) reading or writing it, in source order
    shared_accesses: dict[str, list[tuple[OpFacts, Effect]]]
    #: whether some operation is an async-proxy fence, a CTA barrier, in an asynchronous group
    has_fence: bool
    has_cta_barrier: bool

    def of(self, typed: TypedOpImpl) -> OpFacts:
        return self.by_op[id(typed.op)]

    def actions(self, barrier: str, *kinds: BarrierAction) -> list[tuple[OpFacts, Effect]]:
        """The barrier's actions of the given kinds (all when none are given)."""
        return [(f, e) for f, e in self.barrier_actions.get(barrier, ()) if not kinds or e.barrier in kinds]

    def async_proxy_readers(self) -> set[str]:
        """Shared buffers some operation reads through the async proxy (TMA stores, wgmma operands)."""
        return {
            name
            for name, acc in self.shared_accesses.items()
            if any(e.async_proxy and e.access in (Access.READ, Access.READWRITE) for _, e in acc)
        }


def facts(model: KernelModel) -> KernelFacts:
    """The facts of ``model``: computed once per model in its checked module's analyses
    (:func:`~cake_core.verify.analyses.for_model`), on every call where it has none."""
    table = for_model(model)
    if table is None:
        return _index(model)
    return table.get("facts", id(model), lambda: _index(model))  # the facts hold the model


def _index(model: KernelModel) -> KernelFacts:
    """The facts of ``model``, computed."""
    ops: list[OpFacts] = []
    by_op: dict[int, OpFacts] = {}
    barriers: dict[str, list[tuple[OpFacts, Effect]]] = defaultdict(list)
    shared: dict[str, list[tuple[OpFacts, Effect]]] = defaultdict(list)
    fence = cta = False
    for typed in model.ops:
        prim = typed.prim
        of = OpFacts(typed, tuple(prim.effects(typed)), frozenset(prim.features(typed)))
        ops.append(of)
        by_op[id(typed.op)] = of
        for e in of.effects:
            name = e.operand.name
            if name is None:
                continue
            if e.tier is Kind.BARRIER and e.barrier is not None:
                barriers[name].append((of, e))
            elif e.tier is Kind.SHARED and e.access is not Access.NONE:
                shared[name].append((of, e))
        fence = fence or is_proxy_fence(prim)
        cta = cta or prim.cta_barrier
    return KernelFacts(model, ops, by_op, dict(barriers), dict(shared), fence, cta)
