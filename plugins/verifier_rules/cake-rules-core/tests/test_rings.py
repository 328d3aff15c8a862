"""Which barrier releases a ring's stages (read from the declared effects), and which refills skipped it."""

from __future__ import annotations

from pathlib import Path

from cake_core import cli
from cake_core.ir.parser import parse
from cake_core.verify.facts import facts
from cake_core.verify.protocol import protocol
from cake_core.verify.runner import check_registered

from cake_rules_core.rings import empty_wait, release_of, unawaited_refill

SCHEDULE = (Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules" / "explicit" / "hopper.cake").read_text()


def _assign(registry, text: str = SCHEDULE, d: int = 128):
    checked = check_registered(parse(text, "hopper.cake"), registry.get("targets", "h200"), registry)
    return next(m for m in checked.models.values() if m.kernel.name == "assign" and m.env["D"] == d)


def test_each_ring_of_the_hopper_schedule_has_its_empty_barrier(pack_registry) -> None:
    m = _assign(pack_registry)  # D = 128: the x ring and the centroid ring are both two stages deep
    assert (m.smem["xs"].stages, m.smem["cs"].stages) == (2, 2)
    kf = facts(m)
    rings = {b: release_of(kf, b) for b in ("xs", "cs", "csq")}
    barriers = {b: r.barrier for b, r in rings.items() if r is not None}
    assert barriers == {"xs": "xempty", "cs": "cempty", "csq": "cempty"}
    assert [of.typed.op.name for of, _ in rings["csq"].reads] == ["argmin.update"]
    release = next(i for i, t in enumerate(SCHEDULE.splitlines(), 1) if "mbarrier.arrive xempty[xb]" in t)
    assert [of.typed.op.loc.line for of, _ in rings["xs"].arrivals] == [release]


def test_two_candidates_without_a_matching_stage_index_name_none(pack_registry) -> None:
    # the consumers release the x ring at a stage index they never read it at: no way to tell the rings apart
    text = SCHEDULE.replace("mbarrier.arrive xempty[xb]", "mbarrier.arrive xempty[it % XS]")
    assert release_of(facts(_assign(pack_registry, text)), "xs") is None


def test_a_refill_without_its_wait_is_found_in_the_writer_trace(pack_registry) -> None:
    text = SCHEDULE.replace("      mbarrier.wait xempty[xb], parity=(it / XS + 1) % 2\n", "")
    m = _assign(pack_registry, text, d=256)
    run = protocol(m).runs[-1]
    producer = run.traces[0]
    fills = [s for s in producer if any(x.write and x.buffer == "xs" for x in s.accesses)]
    assert len(fills) >= 2
    assert unawaited_refill(producer, fills[0], "xs", 0, "xempty") is None  # the first fill waits for nothing
    assert unawaited_refill(producer, fills[1], "xs", 0, "xempty") == ()
    intact = protocol(_assign(pack_registry, d=256)).runs[-1].traces[0]
    refill = [s for s in intact if any(x.write and x.buffer == "xs" for x in s.accesses)][1]
    assert unawaited_refill(intact, refill, "xs", 0, "xempty") is None


def test_the_wait_a_refill_needs_is_spelled_from_the_stage_index(pack_registry) -> None:
    m = _assign(pack_registry)
    role = next(r.role for r in m.roles if r.role.name == "producer")
    (cs,) = [e for of, e in facts(m).shared_accesses["cs"] if of.role.role is role]
    assert empty_wait(m, role, "cempty", cs.operand.stage) == "mbarrier.wait cempty[s], parity=(g / S + 1) % 2"
