"""Pipes: what the compiler derives from a ``pipe`` declaration and the operations that name it.

A pipe ``pipe cring: producer -> consumers of cs, csq`` is a ring of shared-memory stages (its
buffers' stages) handed from a producer role to its consumer roles. The author writes what happens —
``pipe.acquire s <- cring`` (wait until the next stage is free, then arm it), the copies into
``cs[s]``, ``pipe.wait s <- cring`` (wait until the next stage is full), ``pipe.release cring[s]`` —
and the compiler derives the numbers:

* two mbarrier rings per pipe (:func:`barrier_decls`): ``cring.full``, count 1, which the producer's
  acquire arms with the transaction bytes of the copies issued into the stage and those copies
  complete; and ``cring.empty``, whose count is every thread of every consumer instance;
* which stage each acquire and wait takes: each role instance counts the stages it has taken from
  the pipe (a counter no kernel can name, :func:`counter`), so the ``n``-th is stage ``n % S``; a role
  on both sides of a pipe (one role filling its own ring ahead of its reads) counts its acquires and
  its waits apart;
* the phase parity each waits for: ``(n / S) % 2`` for a consumer's wait on ``full``, one phase
  behind, ``(n / S + 1) % 2``, for the producer's wait on ``empty`` (every stage starts free);
* the bytes an acquire expects (:func:`derive_bytes`): the full boxes of the copies into the stage it
  acquired, issued after it in its block.

The operations that use these are :mod:`cake_core.primitives.pipes`; the verifier's pipe rules read
:func:`holders` (which stages each operation may touch) and the simulated traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from cake_core.diagnostics import codes
from cake_core.diagnostics.diagnostic import Diagnostic, Label
from cake_core.ir import nodes as n
from cake_core.ir.cluster import cluster_expr
from cake_core.ir.primitive import Access, BarrierAction, Kind, numel, static_shape

#: the sides of a pipe a role plays
PRODUCER, CONSUMER = "producer", "consumer"


def full_barrier(pipe: str) -> str:
    """The barrier ring a pipe's stages fill on."""
    return f"{pipe}.full"


def empty_barrier(pipe: str) -> str:
    """The barrier ring a pipe's consumers release its stages on."""
    return f"{pipe}.empty"


def counter(pipe: str, side: str = CONSUMER) -> str:
    """The role-instance counter of the stages taken from ``pipe`` on ``side`` (no kernel can write the
    name): ``cring#n`` for the waits, ``cring#p`` for the acquires."""
    return f"{pipe}#{'p' if side == PRODUCER else 'n'}"


def stages_expr(k: n.Kernel, p: n.Pipe) -> n.Expr:
    """The pipe's stage count as written: its first buffer's (sema checks that they agree)."""
    for b in p.buffers:
        s = k.buffer(b) or next((m for m in k.mems if m.name == b), None)
        if s is not None and s.stages is not None:
            return s.stages
    return n.Num(1)


def barrier_decls(k: n.Kernel) -> tuple[n.Barrier, ...]:
    """The barrier rings derived for every pipe of ``k``, located at the pipe's declaration."""
    out = []
    for p in k.pipes:
        stages = stages_expr(k, p)
        threads: n.Expr | None = None
        for name in p.consumers:
            r = next((r for r in k.roles if r.name == name), None)
            if r is None:
                continue
            t = n.Bin("*", n.Bin("-", r.warp_stop, r.warp_start), n.Num(32))
            threads = t if threads is None else n.Bin("+", threads, t)
        if p.cluster and threads is not None:  # every consumer thread of every CTA of the cluster releases
            threads = n.Bin("*", threads, cluster_expr(k))
        out.append(n.Barrier(full_barrier(p.name), "mbarrier", n.Num(1), stages, loc=p.loc))
        out.append(n.Barrier(empty_barrier(p.name), "mbarrier", threads or n.Num(1), stages, loc=p.loc))
    return tuple(out)


def take(k: n.Kernel, p: n.Pipe, side: str) -> dict[str, n.Expr]:
    """The derived attributes of an operation that takes the next stage of ``p`` (``pipe.acquire``
    on the producer's side, ``pipe.wait`` on a consumer's): ``stage`` and ``parity`` over the
    role instance's counter."""
    s = stages_expr(k, p)
    pos = n.Name(counter(p.name, side))
    phase = n.Bin("/", pos, s)
    if side == PRODUCER:
        phase = n.Bin("+", phase, n.Num(1))
    return {"stage": n.Bin("%", pos, s), "parity": n.Bin("%", phase, n.Num(2))}


def advance(p: str, side: str = CONSUMER) -> n.Expr:
    """The counter of ``p`` on ``side`` after one more stage is taken."""
    return n.Bin("+", n.Name(counter(p, side)), n.Num(1))


def owner(k: n.Kernel) -> dict[str, n.Pipe]:
    """Which pipe owns each shared buffer a pipe names."""
    return {b: p for p in k.pipes for b in p.buffers}


def release_fences_async_proxy(ops: Iterable[Any], p: n.Pipe, role: str) -> bool:
    """Whether ``pipe.release`` of ``p`` by ``role`` fences the async proxy before its arrival: the role
    touches a buffer of the pipe through the generic proxy (``ldmatrix``, ordinary loads) and the
    stages are refilled through the async proxy (TMA). The arrival orders the role's accesses for the
    generic proxy only; without ``fence.proxy.async.shared::cta`` the refill may land on bytes an
    ``ldmatrix`` issued before the arrival still reads. ``ops``: the kernel's typed operations."""
    buffers = set(p.buffers)
    generic = refilled = False
    for t in ops:
        for e in t.prim.effects(t):
            if e.tier is not Kind.SHARED or e.access is Access.NONE or e.operand.name not in buffers:
                continue
            if e.async_proxy:
                refilled = refilled or e.access is not Access.READ
            elif t.role.role.name == role:
                generic = True
    return generic and refilled


def side_of(p: n.Pipe, role: str) -> str | None:
    """The side of ``p`` that ``role`` plays, the producer's first where it plays both (:func:`sides`)."""
    if role in p.producers:
        return PRODUCER
    if role in p.consumers:
        return CONSUMER
    return None


def sides(p: n.Pipe, role: str) -> tuple[str, ...]:
    """Every side of ``p`` that ``role`` plays: a one-role kernel that fills its own ring plays both."""
    return tuple(side for side, roles in ((PRODUCER, p.producers), (CONSUMER, p.consumers)) if role in roles)


def take_side(prim: Any) -> str:
    """The side of a pipe an operation that takes a stage works on: the producer's waits for a free stage
    (a derived wait on the ``empty`` ring), a consumer's for a full one."""
    empty = any(s.derived and s.name == "empty" and s.barrier is BarrierAction.WAIT for s in prim.signature.ins)
    return PRODUCER if empty else CONSUMER


# ---------------------------------------------------------------------------------------------------
# What each operation may touch
# ---------------------------------------------------------------------------------------------------


@attrs.frozen
class Holding:
    """A stage name in scope at an operation: the pipe it is a stage of, the side that took it, and
    the operation that last bound it on the way there."""

    pipe: str
    side: str
    bound_by: n.Op


def holders(
    k: n.Kernel, pipe_ops: frozenset[str], producing: frozenset[str] = frozenset()
) -> dict[int, dict[str, Holding]]:
    """For every operation (by ``id``), the stage names bound by pipe operations (``pipe_ops``: the
    primitives whose outputs bind stages) that are in scope there, and what each holds. A name bound
    again inside a nested block (a loop carrying the stage of the last iteration) holds the latest
    binding of the enclosing walk. A role on both sides of a pipe holds a name on the side of the
    operation that bound it: ``producing`` names the takes of the producer's side (:func:`take_side`)."""
    out: dict[int, dict[str, Holding]] = {}

    def block(body: tuple[n.Stmt, ...], role: str, held: dict[str, Holding]) -> None:
        held = dict(held)
        for s in body:
            if isinstance(s, n.Op):
                out[id(s)] = held
                if s.name in pipe_ops and s.outs and s.ins and isinstance(s.outs[0], n.Name):
                    p = pipe_named(s.ins[0])
                    pipe = k.pipe(p) if p else None
                    if pipe is not None:
                        side = side_of(pipe, role)
                        if len(sides(pipe, role)) == 2:
                            side = PRODUCER if s.name in producing else CONSUMER
                        if side is not None:
                            held = {**held, s.outs[0].id: Holding(pipe.name, side, s)}
            elif isinstance(s, n.Let):
                held.pop(s.name, None)
            elif isinstance(s, n.For):
                block(s.body, role, held)
            elif isinstance(s, n.If):
                block(s.then, role, held)
                block(s.orelse, role, held)

    for r in k.roles:
        block(r.body, r.name, {})
    return out


def pipe_named(e: n.Expr | None) -> str | None:
    """The name an operation's pipe operand gives (``cring`` or ``cring[s]``)."""
    if isinstance(e, n.Name):
        return e.id
    if isinstance(e, n.Ref):
        return e.name
    return None


def stage_name(e: n.Expr | None) -> str | None:
    """The name a stage index is, when it is one name (``cs[s]``), else None."""
    return e.id if isinstance(e, n.Name) else None


# ---------------------------------------------------------------------------------------------------
# Transaction bytes
# ---------------------------------------------------------------------------------------------------


def derive_bytes(role_body: tuple[n.Stmt, ...], typed: Mapping[int, object], cluster: int = 1) -> Iterator[Diagnostic]:
    """Sets the ``bytes`` an acquire expects on each ``pipe.acquire`` of one role body (``typed``:
    its typed operations by ``id``): the full-box bytes of the asynchronous copies into the stage
    it bound, issued after it in the same block, until the name is bound again. A multicast copy
    (its write reaches every CTA of the cluster) counts ``cluster`` times: every rank issues its
    own, and each lands in this CTA's stage. Yields what
    stops a count from being known when the kernel is compiled: a copy into the stage in a nested
    block (it may run any number of times), a copy whose box is not static."""
    for body in _blocks(role_body):
        for i, s in enumerate(body):
            t = typed.get(id(s)) if isinstance(s, n.Op) else None
            if t is None or "bytes" not in t.prim.derives:
                continue
            pipe = t.ins[0].name
            handle = stage_name(s.outs[0]) if s.outs else None
            full = full_barrier(pipe)
            total = 0
            for later in body[i + 1 :]:
                if isinstance(later, n.Op):
                    lt = typed.get(id(later))
                    if lt is None:
                        continue
                    if later.outs and stage_name(later.outs[0]) == handle and lt.outs[0].slot.binds:
                        break  # the name is bound again: later copies into it are the next stage's
                    if not _fills(lt, full, handle):
                        continue
                    nbytes = _copy_bytes(lt, cluster)
                    if nbytes is None:
                        yield codes.PIPE.at(
                            later.loc, f"the bytes `{later.name}` copies into a stage of pipe `{pipe}` "
                            "are not known when the kernel is compiled",
                            label="box size not static", help="give the copy a box of compile-time extents",
                        )  # fmt: skip
                    else:
                        total += nbytes
                    continue
                for inner in _ops(later):
                    lt = typed.get(id(inner))
                    if lt is not None and _fills(lt, full, handle):
                        yield codes.PIPE.at(
                            inner.loc, f"a copy into stage `{handle}` of pipe `{pipe}` is issued inside a "
                            f"nested block: the bytes its acquire expects would depend on how often it runs",
                            label="inside a loop or condition",
                            secondary=(Label(s.loc, "the stage is acquired here"),),
                            help="issue the copies into a stage in the block of its `pipe.acquire`",
                        )  # fmt: skip
            t.derived["bytes"] = n.Num(total)


def _fills(t: object, full: str, handle: str | None) -> bool:
    """Whether the typed operation ``t`` completes on ``full`` at the stage named ``handle``: a copy into
    that stage."""
    return any(
        e.barrier is BarrierAction.COMPLETE_TX and e.operand.name == full and stage_name(e.operand.stage) == handle
        for e in t.prim.effects(t)  # type: ignore[attr-defined]
    )


def _copy_bytes(t: object, cluster: int = 1) -> int | None:
    """Full-box bytes of an operation's asynchronous writes to shared memory (None: not static), a
    multicast write (``cluster`` effect) counted once per CTA of the cluster."""
    total = 0
    for e in t.prim.effects(t):  # type: ignore[attr-defined]
        if e.asynchronous and e.tier is Kind.SHARED and e.access in (Access.WRITE, Access.READWRITE):
            shape = static_shape(e.operand)
            if shape is None or e.operand.dtype is None:
                return None
            total += numel(shape) * e.operand.dtype.bytes * (cluster if e.cluster else 1)
    return total


def _blocks(body: tuple[n.Stmt, ...]) -> Iterator[tuple[n.Stmt, ...]]:
    yield body
    for s in body:
        if isinstance(s, n.For):
            yield from _blocks(s.body)
        elif isinstance(s, n.If):
            yield from _blocks(s.then)
            yield from _blocks(s.orelse)


def _ops(s: n.Stmt) -> Iterator[n.Op]:
    for x in n.walk_stmts((s,)):
        if isinstance(x, n.Op):
            yield x
