"""Fixtures of the interpreter tests: the core primitives plus small mbarrier and bulk-copy primitives.

No core primitive uses mbarriers yet (they come with the Hopper path), so these tests bring their own,
defined only by signatures and declared effects: the interpreter must run them without knowing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from cake_core import plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.primitive import (
    Access, AttrSpec, BarrierAction, Effect, ExecContext, Kind, Primitive, Signature, Slot, TypedOp,
)  # fmt: skip
from cake_core.ir.model import CheckedModule
from cake_core.ir.sema import check_module
from cake_core.problems import kmeans_assign

SCHEDULES = Path(kmeans_assign.__file__).parent / "schedules"


def _with_amount(effects: tuple[Effect, ...], amount: n.Expr | None, arrivals: n.Expr | None = None) -> tuple:
    """The barrier effects with ``amount`` (parity or bytes) and ``arrivals`` filled in."""
    return tuple(
        attrs.evolve(e, amount=amount, arrivals=arrivals) if e.tier is Kind.BARRIER else e for e in effects
    )


class MbarWait(Primitive):
    name = "test.wait"
    summary = "wait until the barrier phase of the given parity completes (derived when not given)"
    signature = Signature(
        ins=[Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.WAIT)],
        attrs=[AttrSpec("parity", "int")],
    )

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        return _with_amount(super().effects(op), op.attr("parity"))

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass


class MbarArrive(Primitive):
    name = "test.arrive"
    summary = "`n` arrivals on a barrier (one when not given)"
    signature = Signature(
        ins=[Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE)],
        attrs=[AttrSpec("n", "int")],
    )

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        return _with_amount(super().effects(op), None, op.attr("n"))

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass


class MbarArriveTx(Primitive):
    name = "test.arrive_tx"
    summary = "expect `tx` transaction bytes on a barrier and arrive"
    signature = Signature(
        ins=[Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE_EXPECT_TX)],
        attrs=[AttrSpec("tx", "int", required=True)],
    )

    def effects(self, op: TypedOp) -> tuple[Effect, ...]:
        return _with_amount(super().effects(op), op.attr("tx"))

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass


class BulkCopy(Primitive):
    name = "test.tma"
    summary = "asynchronous bulk copy global -> shared that completes its bytes on a barrier"
    signature = Signature(
        outs=[Slot("dst", {Kind.SHARED}, Access.WRITE, async_proxy=True, asynchronous=True)],
        ins=[
            Slot("src", {Kind.GLOBAL}, Access.READ, async_proxy=True, asynchronous=True, mask_attr="oob"),
            Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.COMPLETE_TX),
        ],
        attrs=[AttrSpec("oob", "word", choices=("zero", "none"))],
    )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))


class BulkCopyArrive(Primitive):
    name = "test.tma_arrive"
    summary = "expect this copy's own bytes on `arrive` and arrive; the copy completes them on `bar`"
    signature = Signature(
        outs=[Slot("dst", {Kind.SHARED}, Access.WRITE, async_proxy=True, asynchronous=True)],
        ins=[
            Slot("src", {Kind.GLOBAL}, Access.READ, async_proxy=True, asynchronous=True, mask_attr="oob"),
            Slot("arrive", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.ARRIVE_EXPECT_TX),
            Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.COMPLETE_TX),
        ],
        attrs=[AttrSpec("oob", "word", choices=("zero", "none"))],
    )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))


class Load(Primitive):
    name = "test.load"
    summary = "synchronous load of a tile into registers"
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)],
        ins=[Slot("src", {Kind.SHARED, Kind.GLOBAL}, Access.READ)],
    )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))


class Opaque(Primitive):
    name = "test.opaque"
    summary = "an operation without CPU semantics"
    signature = Signature()


class GroupCopy(Primitive):
    name = "test.gcopy"
    summary = "an asynchronous copy in group `test` that also completes its bytes on a barrier"
    group = "test"
    signature = Signature(
        outs=[Slot("dst", {Kind.SHARED}, Access.WRITE, asynchronous=True)],
        ins=[
            Slot("src", {Kind.GLOBAL}, Access.READ, asynchronous=True),
            Slot("bar", {Kind.BARRIER}, Access.NONE, barrier=BarrierAction.COMPLETE_TX),
        ],
    )

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))


class GroupCommit(Primitive):
    name = "test.gcommit"
    summary = "close the open group `test`"
    group_commit = "test"
    signature = Signature()

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        pass


TEST_PRIMITIVES = (MbarWait, MbarArrive, MbarArriveTx, BulkCopy, BulkCopyArrive, Load, Opaque, GroupCopy, GroupCommit)


@pytest.fixture(scope="session")
def primitives() -> dict[str, Primitive]:
    reg = plugins.registry()
    prims = {name: reg.get("primitives", name) for name in reg.names("primitives")}
    for cls in TEST_PRIMITIVES:
        prims[cls.name] = cls()
    return prims


@pytest.fixture(scope="session")
def compile_cake(primitives: dict[str, Primitive]) -> Callable[..., CheckedModule]:
    """Parse and check Cake text with the core and test primitives; the module must check clean."""

    def compile_(text: str, file: str = "test.cake") -> CheckedModule:
        checked = check_module(parse(text, file), primitives)
        assert checked.ok, [str(d.message) for d in checked.diagnostics]
        return checked

    return compile_


@pytest.fixture(scope="session")
def schedule_text() -> Callable[[str], str]:
    return lambda name: (SCHEDULES / f"{name}.cake").read_text()
