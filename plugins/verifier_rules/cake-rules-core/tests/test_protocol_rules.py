"""The protocol gates (CR111-CR117) against planted bugs in the real Hopper schedule, and what their
findings say.

The interpreter's tests (tests/semantics/test_interp.py) plant the same bugs and watch a run go wrong;
here the verifier must refuse each mutant before anything runs, with the rule that names the mistake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import cli
from cake_core.verify.runner import verify_source

SCHEDULE = Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules" / "explicit" / "hopper.cake"
#: the schedule's one known finding (see test_schedules): kept out of these comparisons
STRIDE = "CR118"

HOPPER_BUGS = {
    # the producer refills a ring slot the consumers may still be reading
    "no-empty-wait": ("        mbarrier.wait cempty[s], parity=(g / S + 1) % 2\n", "", "CR116",
                      "tma.load cs[s] <- c[b, kt * BN : +BN, :], cfull[s]"),
    # the producer refills the x stage the consumers may still be reading (at D=256 its ring has one stage)
    "no-x-empty-wait": ("      mbarrier.wait xempty[xb], parity=(it / XS + 1) % 2\n", "", "CR116",
                        "tma.load xs[xb] <- x[b, t * BM : +BM, :], xfull[xb]"),
    # the consumers read a slot before its copy landed
    "no-full-wait": ("        mbarrier.wait cfull[s], parity=(g / S) % 2\n", "", "CR115",
                     "wgmma acc <- xs[xb][self * ROWS : +ROWS, :], cs[s]^T, accumulate=0"),
    # one arrival more than the consumers give
    "empty-count": ("barrier cempty: mbarrier[S] count 128 * WG", "barrier cempty: mbarrier[S] count 128 * WG + 1",
                    "CR111", "barrier cempty: mbarrier[S] count 128 * WG + 1"),
    # expect-tx forgets the c_sq tile
    "tx-bytes": ("bytes=BN * D * 2 + BN * 4", "bytes=BN * D * 2", "CR112", "bytes=BN * D * 2"),
    # the consumer waits on a full slot with the producer's offset: one phase early
    "consumer-offset": ("mbarrier.wait cfull[s], parity=(g / S) % 2", "mbarrier.wait cfull[s], parity=(g / S + 1) % 2",
                        "CR113", "mbarrier.wait cfull[s], parity=(g / S + 1) % 2"),
    # the producer waits on an empty slot without the offset: its first wait never passes
    "producer-offset": ("mbarrier.wait cempty[s], parity=(g / S + 1) % 2", "mbarrier.wait cempty[s], parity=(g / S) % 2",
                        "CR114", "mbarrier.wait cempty[s], parity=(g / S) % 2"),
    # the consumers release a slot while the wgmma reading it is in flight
    "release-early": ("        wgmma.commit\n        wgmma.wait pending=0\n        argmin.update bv, bi <- acc, csq[s], "
                      "base=kt * BN, scale=-2.0, limit=K\n        mbarrier.arrive cempty[s]\n",
                      "        wgmma.commit\n        mbarrier.arrive cempty[s]\n        wgmma.wait pending=0\n"
                      "        argmin.update bv, bi <- acc, csq[s], base=kt * BN, scale=-2.0, limit=K\n",
                      "CR116", "tma.load cs[s] <- c[b, kt * BN : +BN, :], cfull[s]"),
    # parity divided by another depth than the ring's
    "parity-depth": ("mbarrier.wait cfull[s], parity=(g / S) % 2", "mbarrier.wait cfull[s], parity=(g / 2) % 2",
                     "CR113", "mbarrier.wait cfull[s], parity=(g / 2) % 2"),
}


@pytest.mark.parametrize("bug", sorted(HOPPER_BUGS))
def test_planted_protocol_bugs_are_refused_by_the_rule_that_names_them(pack_registry, bug: str) -> None:
    old, new, code, where = HOPPER_BUGS[bug]
    text = SCHEDULE.read_text()
    assert old in text
    mutant = text.replace(old, new)
    report = verify_source(mutant, f"hopper_{bug}.cake", pack_registry.get("targets", "h200"), pack_registry)
    found = {(d.code, d.primary.line) for d in report.diagnostics if d.code != STRIDE}
    line = next(i for i, t in enumerate(mutant.splitlines(), 1) if where in t)
    assert (code, line) in found, report.diagnostics
    assert {c for c, _ in found} == {code}, report.diagnostics  # one mistake, one rule


def _mutant(pack_registry, bug: str):
    """The diagnostics of one planted bug (the schedule's known finding left out), and its lines."""
    old, new, _, _ = HOPPER_BUGS[bug]
    mutant = SCHEDULE.read_text().replace(old, new)
    report = verify_source(mutant, f"hopper_{bug}.cake", pack_registry.get("targets", "h200"), pack_registry)
    return [d for d in report.diagnostics if d.code != STRIDE], mutant.splitlines()


@pytest.mark.parametrize(
    ("bug", "copy", "release", "wait"),
    [
        ("no-empty-wait", "tma.load cs[s]", "mbarrier.arrive cempty[s]",
         "mbarrier.wait cempty[s], parity=(g / S + 1) % 2"),
        ("no-x-empty-wait", "tma.load xs[xb]", "mbarrier.arrive xempty[xb]",
         "mbarrier.wait xempty[xb], parity=(it / XS + 1) % 2"),
    ],
)  # fmt: skip
def test_a_missing_empty_wait_is_blamed_on_the_refill(pack_registry, bug, copy, release, wait) -> None:
    diags, lines = _mutant(pack_registry, bug)

    def line(where: str) -> int:
        return next(i for i, t in enumerate(lines, 1) if where in t)

    (d, *_) = [d for d in diags if d.primary.line == line(copy)]
    assert d.code == "CR116"
    barrier = release.split()[1].split("[")[0]
    assert f"without waiting on `{barrier}[0]` since it last filled the stage: role `consumers`" in d.message
    stage = copy.split()[1]
    assert d.primary.col == lines[d.primary.line - 1].index(stage) + 1  # the stage it overwrites
    labels = {s.loc.line: s.message for s in d.secondary}
    assert "reads the stage here" in labels[line("wgmma acc <-")]
    assert labels[line(release)] == f"and releases it here, arriving on `{barrier}`"
    other = "mbarrier.arrive xempty[xb]" if barrier == "cempty" else "mbarrier.arrive cempty[s]"
    assert line(other) not in labels  # never the release of the other ring
    assert f"`{wait}`" in (d.help or "")


def test_a_refill_racing_its_own_copy_names_the_declared_readers(registry) -> None:
    (d,) = _diags(registry, "CR116/invalid_x_ring_refilled_without_its_wait.cake")
    assert d.message.startswith(
        "role `producer` refills `xs[xb]` (at i=2) without waiting on `xempty[0]` since it last filled the stage"
    )
    assert [s.message for s in d.secondary] == [
        "role `consumer` reads the stage here", "and releases it here, arriving on `xempty`",
    ]  # fmt: skip
    assert "`mbarrier.wait xempty[xb], parity=(i / S + 1) % 2`" in (d.help or "")


def test_a_wait_on_another_stage_is_pointed_at(registry) -> None:
    (d,) = _diags(registry, "CR116/invalid_empty_wait_skipped_on_odd_tiles.cake")
    assert "refills `cs[s]` (at kt=3) without waiting on `empty[1]`" in d.message
    assert "this wait (at kt=2) is on another stage of `empty`" in [s.message for s in d.secondary]


def _diags(registry, rel: str):
    from cake_core.verify.expectations import check_file

    outcome = check_file(Path(__file__).parent / "corpus" / rel, registry)
    assert outcome.ok, outcome.explain()
    return outcome.diagnostics


def test_cr111_names_each_instance_and_the_sizes(registry) -> None:
    (d,) = _diags(registry, "CR111/invalid_two_warpgroups_counted_as_one.cake")
    assert d.message == (
        "`empty` counts 128 arrivals a phase, but phase 0 of `empty[0]` receives 256 (role `consumer` instance 0: "
        "128, role `consumer` instance 1: 128); seen at K=1, N=64"
    )
    assert [s.message for s in d.secondary] == ["arrives here"]


def test_cr112_adds_up_the_copies_of_the_iteration(registry) -> None:
    (d,) = _diags(registry, "CR112/invalid_forgets_the_second_copy.cake")
    assert "expects 8192 bytes on `full[0]` (at kt=0)" in d.message
    assert "deliver 8448 (`tma.load` at line 22: 8192 + `tma.load` at line 23: 256)" in d.message
    assert d.help == "expect 8448 bytes (the copies' full boxes)"


def test_cr113_points_at_the_parity_and_the_wait_before(registry) -> None:
    (d,) = _diags(registry, "CR113/invalid_parity_from_another_depth.cake")
    assert "the 2nd wait of role `consumer` on `full[0]` (at kt=4) waits for parity 0 again" in d.message
    assert d.primary.col > 20  # the parity expression, not the operation
    assert [s.message for s in d.secondary] == ["the wait before (at kt=0): parity 0"]


def test_cr114_deadlock_names_every_blocked_role(registry) -> None:
    (d,) = _diags(registry, "CR114/invalid_producer_waits_like_a_consumer.cake")
    assert d.message.startswith("the roles deadlock: role `producer` waits on `empty[0]` for parity 0")
    assert "role `consumer` waits on `full[0]` for parity 0" in d.message
    assert "(use / stages + 1) % 2" in (d.help or "")


def test_cr115_says_which_stage_was_waited_for(registry) -> None:
    # at K=1 stage 1 is never filled at all: CR127 says so on the same read
    (d,) = [d for d in _diags(registry, "CR115/invalid_next_stage.cake") if d.code == "CR115"]
    assert "no wait on `full[1]` orders the read after it; its last wait on `full` was on stage 0" in d.message
    assert "still in flight" in d.message


def test_cr116_names_the_asynchronous_reader_in_flight(registry) -> None:
    (d,) = _diags(registry, "CR116/invalid_release_before_wgmma_wait.cake")
    assert "while the `wgmma` issued by role `consumer` (at kt=0) still reads it" in d.message


def test_cr117_names_what_publishes_the_write(registry) -> None:
    (d,) = _diags(registry, "CR117/invalid_handoff_between_roles.cake")
    assert "`mbarrier.arrive` publishes it with no `fence.proxy_async` in between" in d.message
    assert {s.message for s in d.secondary} == {
        "`mbarrier.arrive` publishes it", "`fixture.bulk_store` reads `buf` through the async proxy",
    }  # fmt: skip


def test_a_release_before_the_read_is_still_blamed_on_the_release(registry) -> None:
    # the producer waited for the release, so the refill is not the cause: the early arrival is
    (d,) = _diags(registry, "CR116/invalid_release_before_the_read.cake")
    assert "role `consumer` released the stage at line 28 (at kt=0) before its `wgmma` at line 29" in d.message
    assert [(s.loc.line, s.message) for s in d.secondary] == [(28, "released here"), (29, "read after the release")]
