"""What the cluster rules (CR132-CR134) read from a kernel: its multicast copies, the slices every rank of a
cluster writes with them, and how often each role instance of each rank reaches a cluster barrier.

Everything is evaluated the way the interpreter evaluates it (``/`` floor division), at the sample
sizes of the protocol simulation (:mod:`cake_core.verify.samples`: the least sizes and sizes grown by
the constants the kernel divides by), with ``crank`` bound to each rank ``0 .. C-1`` in turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from cake_core.ir import nodes as n
from cake_core.ir.cluster import CRANK
from cake_core.ir.exprs import Compiled, EvalError
from cake_core.ir.model import KernelModel, RoleInfo
from cake_core.ir.primitive import Access, Effect, Kind
from cake_core.verify.facts import OpFacts, facts
from cake_core.verify.samples import Sample, sizes
from cake_core.verify.domain import KernelDomain
from cake_core.verify.scopes import BinderKind
from cake_core.verify.traces import cta_env

_WRITES = (Access.WRITE, Access.READWRITE)
#: the most statements :func:`barrier_counts` walks for one role instance before giving up
WALK_BUDGET = 20000

Env = dict[str, Any]


def multicasts(model: KernelModel) -> list[tuple[OpFacts, Effect]]:
    """Every operation's multicast write to shared memory (an asynchronous shared write whose effect
    reaches every CTA of the cluster, ``Effect.cluster``), in source order."""
    return [
        (of, e) for of in facts(model).ops for e in of.effects
        if e.cluster and e.tier is Kind.SHARED and e.access in _WRITES and e.operand.name
    ]  # fmt: skip


def samples(model: KernelModel) -> list[Sample]:
    """The size assignments the cluster rules evaluate at (distinct, least first)."""
    s = sizes(model)
    if s is None:
        return []
    out: list[Sample] = []
    for sample in (Sample(s.small, s.sms), s.at(1), s.at(2), s.at(3)):
        if sample not in out:
            out.append(sample)
    return out


# -- the slices of a multicast stage -----------------------------------------------------------------


@attrs.frozen
class SliceFault:
    """Ranks' slices of the multicast copies into one stage that do not tile it exactly, at one sample."""

    sample: Sample
    hole: tuple[int, ...] | None  # the first element of the stage no rank writes
    overlap: tuple[tuple[int, ...], tuple[int, int]] | None  # an element written twice, and the ranks writing it
    boxes: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]  # (rank, box) of each copy a rank issues


def _rank_env(domain: KernelDomain, of: OpFacts, env: Env, comp: Compiled) -> Env | None:
    """``env`` (one rank's) with the binders around the operation evaluated at their first values (loops
    at their start, ``self`` 0, lets evaluated); None where an enclosing ``if`` keeps the rank from the
    operation. Raises what an expression without a value raises."""
    env = dict(env)
    for b in domain.scope(of.typed):
        if b.kind is BinderKind.SELF:
            env["self"] = 0
        elif b.kind is BinderKind.LOOP and b.start is not None:
            env[b.name] = int(comp(b.start)(env))  # type: ignore[misc]
        elif b.kind is BinderKind.LET and b.value is not None:
            env[b.name] = comp(b.value)(env)  # type: ignore[misc]
        elif b.kind is BinderKind.GUARD and b.value is not None:
            if bool(comp(b.value)(env)) == b.negate:  # type: ignore[misc]
                return None  # this rank does not take the branch
    return env


def _box(index: tuple[n.Idx, ...], shape: tuple[int, ...], env: Env, comp: Compiled) -> tuple[tuple[int, int], ...]:
    """The (start, stop) per dimension of an access ``index`` into a tile of ``shape``."""
    out = []
    for d, ext in enumerate(shape):
        item = index[d] if d < len(index) else None
        if isinstance(item, n.At):
            lo = int(comp(item.expr)(env))  # type: ignore[misc]
            out.append((lo, lo + 1))
        elif isinstance(item, n.Span):
            lo = int(comp(item.start)(env))  # type: ignore[misc]
            out.append((lo, lo + max(int(comp(item.size)(env)), 0)))  # type: ignore[misc]
        else:
            out.append((0, ext))
    return tuple(out)


def stage_groups(domain: KernelDomain, copies: list[tuple[OpFacts, Effect]]) -> list[list[tuple[OpFacts, Effect]]]:
    """The multicast copies that fill one stage together: into the same buffer, inside the same loops
    (the branches of an ``if`` on `crank` that split a stage between the ranks are one group)."""
    groups: dict[tuple, list[tuple[OpFacts, Effect]]] = {}
    for of, e in copies:
        loops = tuple((b.name, b.start, b.stop, b.step) for b in domain.scope(of.typed) if b.kind is BinderKind.LOOP)
        groups.setdefault((e.operand.name, of.role.role.name, loops), []).append((of, e))
    return list(groups.values())


def slice_faults(domain: KernelDomain, group: list[tuple[OpFacts, Effect]], cluster: int,
                 comp: Compiled) -> SliceFault | None:  # fmt: skip
    """The first sample at which the slices that the ranks write with the multicast copies ``group``
    (:func:`stage_groups`) leave an element of their stage unwritten or write one twice; None where they
    tile it at every sample (or do not evaluate)."""
    model = domain.model
    info = model.smem.get(group[0][1].operand.name or "")
    if info is None:
        return None
    shape = info.shape
    for sample in samples(model):
        boxes: list[tuple[int, tuple[tuple[int, int], ...]]] = []
        try:
            for r in range(cluster):
                base = cta_env(model, sample)
                base[CRANK] = r
                for of, e in group:
                    env = _rank_env(domain, of, base, comp)
                    if env is not None:
                        boxes.append((r, _box(e.operand.index, shape, env, comp)))
        except (EvalError, ZeroDivisionError, TypeError, ValueError, OverflowError):
            continue
        count = np.zeros(shape, dtype=np.int32)
        owner = np.full(shape, -1, dtype=np.int32)
        overlap = None
        for r, box in boxes:
            sl = tuple(slice(max(lo, 0), max(min(hi, ext), 0)) for (lo, hi), ext in zip(box, shape, strict=True))
            region = count[sl]
            if overlap is None and region.size and (region > 0).any():
                at = tuple(int(i) for i in np.argwhere(region > 0)[0])
                first = tuple(a + (s.start or 0) for a, s in zip(at, sl, strict=True))
                overlap = (first, (int(owner[first]), r))
            count[sl] += 1
            owner[sl] = np.where(owner[sl] < 0, r, owner[sl])
        holes = np.argwhere(count == 0)
        hole = tuple(int(i) for i in holes[0]) if len(holes) else None
        if hole is not None or overlap is not None:
            return SliceFault(sample, hole, overlap, tuple(boxes))
    return None


# -- how often each role instance of each rank reaches a cluster barrier -----------------------------


def is_cluster_barrier(model: KernelModel, op: n.Op) -> bool:
    typed = model.by_op.get(id(op))
    return typed is not None and typed.prim.cluster_barrier is True


def _holds(body: tuple[n.Stmt, ...], model: KernelModel) -> bool:
    return any(isinstance(s, n.Op) and is_cluster_barrier(model, s) for s in n.walk_stmts(body))


class _Budget(Exception):
    pass


def _count(body: tuple[n.Stmt, ...], model: KernelModel, env: Env, comp: Compiled, left: list[int]) -> int:
    """Cluster barriers reached walking ``body`` under ``env`` (loops without one are not walked)."""
    total = 0
    for s in body:
        left[0] -= 1
        if left[0] < 0:
            raise _Budget
        if isinstance(s, n.Op):
            total += is_cluster_barrier(model, s)
        elif isinstance(s, n.Let):
            env[s.name] = comp(s.value)(env)  # type: ignore[misc]
        elif isinstance(s, n.For):
            if not _holds(s.body, model):
                continue
            step = int(comp(s.step)(env)) if s.step is not None else 1  # type: ignore[misc]
            if step <= 0:
                raise ValueError("a loop step that is not positive")
            for v in range(int(comp(s.start)(env)), int(comp(s.stop)(env)), step):  # type: ignore[misc]
                env[s.var] = v
                total += _count(s.body, model, env, comp, left)
        elif isinstance(s, n.If):
            total += _count(s.then if comp(s.cond)(env) else s.orelse, model, env, comp, left)  # type: ignore[misc]
    return total


@attrs.frozen
class Reach:
    """How many cluster barriers one role instance of one CTA reaches at one sample."""

    sample: Sample
    cta: int  # the first grid index of the CTA
    role: RoleInfo
    instance: int
    count: int

    @property
    def who(self) -> str:
        which = f" instance {self.instance}" if self.role.instances > 1 else ""
        return f"role `{self.role.role.name}`{which} of the CTA at first grid index {self.cta}"


def reaches(model: KernelModel, cluster: int, comp: Compiled) -> Iterator[list[Reach]]:
    """For each sample, the cluster barriers every role instance of every CTA of one cluster reaches: one
    list for the grid's first cluster and one for its last (CTAs of different clusters may walk their
    persistent loops a different number of times; only the members of one cluster wait for each other). A
    sample whose walk does not evaluate is left out."""
    k = model.kernel
    for sample in samples(model):
        env0 = cta_env(model, sample)
        try:
            first = int(comp(k.grid.extents[0])(env0))  # type: ignore[misc]
        except (EvalError, ZeroDivisionError, TypeError, ValueError):
            continue
        last = max(first - 1, 0) // cluster * cluster
        for start in sorted({0, last}):
            out: list[Reach] = []
            try:
                for c in range(start, min(start + cluster, first)):
                    for info in model.roles:
                        for i in range(info.instances):
                            env = dict(env0)
                            env[k.grid.vars[0]] = c
                            env[CRANK] = c % cluster
                            env["self"] = i
                            env.setdefault("THREADS", info.per * 32)
                            out.append(Reach(sample, c, info, i,
                                             _count(info.role.body, model, env, comp, [WALK_BUDGET])))
            except (_Budget, EvalError, ZeroDivisionError, TypeError, ValueError):
                continue
            yield out


def tainted_names(body: tuple[n.Stmt, ...], seeds: frozenset[str]) -> Mapping[int, str]:
    """For every ``if`` and ``for`` of ``body`` (by ``id``) whose condition or bounds depend on one of
    ``seeds`` (directly or through ``let`` names and loop variables computed from them), that name."""
    out: dict[int, str] = {}

    def dep(e: n.Expr | None, bad: dict[str, str]) -> str | None:
        if e is None:
            return None
        for x in n.walk_expr(e):
            if isinstance(x, n.Name) and x.id in bad:
                return bad[x.id]
        return None

    def block(stmts: tuple[n.Stmt, ...], bad: dict[str, str]) -> None:
        bad = dict(bad)
        for s in stmts:
            if isinstance(s, n.Let):
                why = dep(s.value, bad)
                if why is not None:
                    bad[s.name] = why
                else:
                    bad.pop(s.name, None)
            elif isinstance(s, n.For):
                why = dep(s.start, bad) or dep(s.stop, bad) or dep(s.step, bad)
                if why is not None:
                    out[id(s)] = why
                block(s.body, bad)
            elif isinstance(s, n.If):
                why = dep(s.cond, bad)
                if why is not None:
                    out[id(s)] = why
                block(s.then, bad)
                block(s.orelse, bad)

    block(body, {name: name for name in seeds})
    return out
