"""The words of the interpreter's findings: faults, reads of undefined memory, races and deadlocks.

Each function turns what the interpreter saw (a region outside its store, a tracker's
:class:`~cake_core.semantics.races.Conflict`, the blocked instances of a CTA) into a
:class:`~cake_core.semantics.findings.Finding` that stands alone: what happened, where the other
side is, and how to fix it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cake_core.diagnostics.diagnostic import Label
from cake_core.location import Loc
from cake_core.ir.primitive import Access, Effect, Kind
from cake_core.semantics import codes
from cake_core.semantics.engine import CLUSTER, CTA, DONE, MBAR
from cake_core.semantics.findings import Finding, Findings, Stop
from cake_core.semantics.memory import Region, region_text
from cake_core.semantics.races import Conflict

if TYPE_CHECKING:
    from cake_core.semantics.operands import OpInfo

#: a store's kind in words
TIERS = {Kind.GLOBAL: "global tensor", Kind.SHARED: "shared buffer", Kind.REGISTERS: "register tile"}


def tier_word(kind: Kind) -> str:
    """What a finding calls a store of ``kind``: the core's by their declarations, a plugin tier's
    region by the tier's name."""
    return TIERS.get(kind) or f"`{kind}` region"


def out_of_bounds(findings: Findings, who: str, info: OpInfo, e: Effect, region: Region) -> Stop | None:
    """The fault of an unmasked access outside the store (or of any access to a stage outside a ring),
    or None when the access is in bounds."""
    store = region.store
    bad_stage = store.stages is not None and not 0 <= region.lo[0] < store.stages
    if not region.oob or (e.masked and not bad_stage):
        return None
    op = info.op
    what = {Access.READ: "read", Access.WRITE: "write", Access.READWRITE: "access"}.get(e.access, "access")
    parts = []
    first = 0
    if store.stages is not None:
        first = 1
        if bad_stage:
            parts.append(f"stage {region.lo[0]} of a {store.stages}-stage ring")
    for d in range(first, len(store.shape)):
        lo, size, ext = region.lo[d], region.size[d], store.shape[d]
        if lo < 0 or lo + size > ext:
            idx = str(lo) if size == 1 and not region.keep[d] else f"{lo}..{lo + size - 1}"
            parts.append(f"index {idx} of dimension {d - first} (extent {ext})")
    slot = e.operand.slot
    help_ = None
    if slot.mask_attr is not None and not bad_stage:
        spec = info.prim.signature.attr(slot.mask_attr)
        choice = next((c for c in (spec.choices if spec else ()) if c != "none"), None)
        if choice is not None:
            help_ = (f"if the edge tile is meant to be partial, mask it with `{slot.mask_attr}={choice}`; "
                     "otherwise fix the tile's offset")  # fmt: skip
    return findings.stop(
        codes.OUT_OF_BOUNDS, e.operand.expr.loc,
        f"out-of-bounds {what} of {region.text()} by `{op.name}`: " + "; ".join(parts) +
        f" of the {tier_word(store.kind)} `{store.name}` {list(store.shape[first:])}",
        who, label="outside the tensor", help=help_,
        notes=(f"operand `{slot.name}` of `{op.name}` is not masked: a GPU faults here",),
    )  # fmt: skip


def uninitialized(findings: Findings, who: str, info: OpInfo, slot: str, region: Region, missing: int,
                  first: tuple[int, ...] | None) -> Finding:  # fmt: skip
    """A read of ``missing`` never-written elements of ``region`` (the first at ``first``)."""
    store = region.store
    tier = tier_word(store.kind)
    total = int(np.count_nonzero(region.in_bounds()))
    return findings.make(
        codes.UNINITIALIZED, info.typed.operand(slot).expr.loc,
        f"`{info.op.name}` reads {region.text()} ({tier}): {missing} of its {total} elements were never "
        f"written (the first at {list(first) if first else '?'})",
        who, label="reads undefined elements",
    )  # fmt: skip


def race(findings: Findings, who: str, comp: int, info: OpInfo, c: Conflict, loc: Loc) -> Finding:
    """A race the tracker found, at the operand ``loc``, by the role instance ``who`` (component ``comp``)."""
    op = info.op
    where = region_text(c.store, c.box)
    by = f"`{op.name}` ({who})"
    if c.transfer is not None:
        t = c.transfer
        copy = all(w.store.kind is not Kind.REGISTERS for w in t.writes)
        if c.kind == "pending-write" and c.access == "read" and copy:
            msg = (f"read of {where} by {by} before its copy completed: the `{t.op_name}` issued by {t.who} "
                   f"at line {t.loc.line} is still in flight")  # fmt: skip
            label, other = "read before the copy completed", "the copy, still in flight"
            help_ = ("wait for the copy first: for its asynchronous group (fewer groups `pending`), or for "
                     "the barrier phase it completes")  # fmt: skip
        elif c.kind == "pending-write" and c.access == "read":
            msg = (f"read of {where} by {by} before the asynchronous `{t.op_name}` that writes it completed: "
                   f"issued by {t.who} at line {t.loc.line}, it is still in flight")  # fmt: skip
            label, other = "read before the asynchronous write completed", "still in flight"
            help_ = "wait for its asynchronous group first (fewer groups `pending`)"
        elif c.kind == "pending-write":
            msg = (f"write of {where} by {by} while the asynchronous `{t.op_name}` issued by {t.who} at line "
                   f"{t.loc.line} still writes it")  # fmt: skip
            label, other = "write during an asynchronous write", "still in flight"
            help_ = "wait for the asynchronous operation to complete before writing the region"
        else:
            msg = (f"write of {where} by {by} while the asynchronous `{t.op_name}` issued by {t.who} at line "
                   f"{t.loc.line} still reads it")  # fmt: skip
            label, other = "write during an asynchronous read", "the asynchronous read, still in flight"
            help_ = "wait for the asynchronous operation to complete before overwriting what it reads"
        secondary = (Label(t.loc, other),)
        notes: tuple[str, ...] = ()
    else:
        r = c.other
        assert r is not None
        same = r.comp == comp
        if c.kind == "raw":
            msg = f"read of {where} by {by} is not ordered after its write by `{r.op}` ({r.who}, line {r.loc.line})"
            label, other = "unordered read", "the write"
            help_ = ("put a CTA barrier (`bar.sync`) between the write and the read" if same else
                     "make the reader wait on a barrier phase the writer completes after writing")  # fmt: skip
        elif c.kind == "war":
            msg = (f"write of {where} by {by} may overwrite it before `{r.op}` ({r.who}, line {r.loc.line}) "
                   "has read it (overwrite before empty)")  # fmt: skip
            label, other = "overwrite before empty", "the read"
            help_ = ("put a CTA barrier (`bar.sync`) between the read and the write" if same else
                     "make the writer wait on a barrier phase the reader completes after reading")  # fmt: skip
        else:
            msg = f"write of {where} by {by} is not ordered with the write by `{r.op}` ({r.who}, line {r.loc.line})"
            label, other = "unordered writes", "the other write"
            help_ = "order the two writes with a barrier"
        secondary = (Label(r.loc, other),)
        notes = (("the threads of one role instance are ordered among themselves only by a CTA barrier: "
                  "one operation's shared-memory data reaches another operation's threads after `bar.sync`",)
                 if same else ())  # fmt: skip
    return findings.make(codes.RACE, loc, msg, who, label=label, secondary=secondary, notes=notes, help=help_)


def deadlock(findings: Findings, instances: Sequence[Any], kernel: Loc) -> Finding:
    """No instance of the CTA can go on and no copy is in flight: what each waits on (``instances``:
    the interpreter's, with ``who``, ``state``, ``wait`` and ``blocked_op``)."""
    lines: list[str] = []
    secondary: list[Label] = []
    primary: Loc | None = None
    finished = [a for a in instances if a.state == DONE]
    for a in instances:
        if a.state == MBAR and a.wait is not None:
            bar, parity, op = a.wait
            lines.append(f"{a.who} waits on {bar.label} for the phase of parity {parity} ({bar.state_text()})")
            secondary.append(Label(op.loc, f"{a.who} waits on {bar.label}"))
            primary = primary or op.loc
        elif a.state in (CTA, CLUSTER) and a.blocked_op is not None:
            every = "every role of every CTA of the cluster" if a.state == CLUSTER else "every role of the CTA"
            lines.append(f"{a.who} waits at `{a.blocked_op.name}` for {every}")
            secondary.append(Label(a.blocked_op.loc, f"{a.who} waits here"))
            primary = primary or a.blocked_op.loc
    for a in finished:
        lines.append(f"{a.who} has finished")
    notes = []
    if finished and any(a.state in (CTA, CLUSTER) for a in instances):
        notes.append("a CTA barrier needs every warp of the CTA; a role that has finished never arrives")
    blocked_roles = ", ".join(dict.fromkeys(a.who for a in instances if a.state in (MBAR, CTA, CLUSTER)))
    return Finding(
        codes.DEADLOCK, f"deadlock: {blocked_roles} can never go on — " + "; ".join(lines),
        primary or kernel,
        label="blocked forever", secondary=tuple(secondary[1:]), notes=tuple(notes),
        kernel=findings.kernel, cta=findings.coords, fatal=True,
        help="every phase a role waits for needs its arrivals (the barrier's `count`) and its transaction bytes",
    )  # fmt: skip
