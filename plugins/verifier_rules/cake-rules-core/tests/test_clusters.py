"""The cluster rules (CR131-CR134) on the clustered K-Means schedules and on planted mistakes: the
schedules verify clean with their barrier protocol actually simulated (every rank's multicast slice
and every CTA's arrivals counted), and each planted mistake is refused by the rule that names it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import cli
from cake_core.ir.parser import parse_file
from cake_core.pipeline import Candidate
from cake_core.verify.protocol import protocol
from cake_core.verify.runner import check_registered, verify_source

SCHEDULES = Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules"
PIPE = "hopper_cluster.cake"
EXPLICIT = "explicit/hopper_cluster.cake"


def _narrow(text: str, dims: str = "64") -> str:
    """The schedule with fewer specializations (bf16, the given `D`s), to keep the tests quick."""
    assert text.count("T in {bf16, f16}") == 3 and text.count("D in {64, 128, 256}") == 3
    return text.replace("T in {bf16, f16}", "T in {bf16}").replace("D in {64, 128, 256}", f"D in {{{dims}}}")


def _verify(registry, text: str, tmp_path: Path):
    path = tmp_path / "planted.cake"
    path.write_text(text)
    return Candidate.load(path, registry.get("targets", "h200"), registry).verify()


@pytest.mark.parametrize(("name", "dims"), [(PIPE, "256"), (EXPLICIT, "64")])
def test_clustered_schedules_verify_clean_with_their_protocol_simulated(pack_registry, name: str, dims: str,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    """At D=64 (4 centroid stages, 256 rows a CTA) or D=256 (2 stages, 128 rows): one specialization each,
    to keep the test quick (`cake verify` of the schedules checks all twelve)."""
    text = _narrow((SCHEDULES / name).read_text(), dims)
    report = _verify(pack_registry, text, tmp_path)
    assert report.diagnostics == (), report.diagnostics
    # the protocol rules looked at the clustered kernel: no sample was skipped for want of `crank`
    checked = check_registered(parse_file(tmp_path / "planted.cake")[0], report.target, pack_registry)
    models = [m for (k, _), m in checked.models.items() if k == "assign"]
    assert len(models) == 1
    for model in models:
        runs = protocol(model).runs
        assert runs and all(r.skipped is None and r.traces for r in runs)


def test_a_pipe_that_is_not_a_cluster_pipe_is_refused(pack_registry, tmp_path: Path) -> None:
    text = (SCHEDULES / PIPE).read_text()
    assert "of cs, csq cluster" in text
    report = _verify(pack_registry, _narrow(text).replace("of cs, csq cluster", "of cs, csq"), tmp_path)
    assert [d.code for d in report.diagnostics] == ["CR133"], report.diagnostics
    assert "pipe `cring` carries multicast copies into `cs`" in report.diagnostics[0].message


def test_a_release_on_the_own_cta_only_is_refused(pack_registry, tmp_path: Path) -> None:
    text = (SCHEDULES / EXPLICIT).read_text()
    assert "mbarrier.arrive cempty[s], cluster" in text
    local = _narrow(text).replace("mbarrier.arrive cempty[s], cluster", "mbarrier.arrive cempty[s]")
    report = _verify(pack_registry, local, tmp_path)
    # CR133 names the cause; CR111 the consequence on this CTA's barrier (`cempty` counts both CTAs' threads)
    assert [d.code for d in report.diagnostics] == ["CR111", "CR133"], report.diagnostics
    assert "on this CTA's `cempty` only" in report.diagnostics[1].message


def test_a_multicast_lands_every_ranks_slice_in_the_expected_bytes(pack_registry, tmp_path: Path) -> None:
    """The one-CTA simulation counts a multicast copy's bytes once per rank: expecting only this rank's
    half of the centroid tile is refused."""
    text = (SCHEDULES / EXPLICIT).read_text()
    whole = "mbarrier.arrive.expect_tx cfull[s], bytes=BN * D * 2 + BN * 4"
    assert whole in text
    report = _verify(pack_registry, _narrow(text).replace(whole, whole.replace("BN * D * 2", "SLICE * D * 2")),
                     tmp_path)  # fmt: skip
    assert [d.code for d in report.diagnostics] == ["CR112"], report.diagnostics
    # at D=64 each rank copies 64 x 64 bf16 into both CTAs: 2 x 8192 bytes of `cs` land on each `cfull`
    assert "deliver 16896 (`tma.load` at line 63: 16384 + " in report.diagnostics[0].message


BRANCHES = """
kernel branches(x: global bf16[B, N, 64], c: global bf16[B, 128, 64], out: global f32[B, N])
  domain B >= 1, N >= 1
  const R = 128, C = 2
  grid (t, b) over (C * cdiv(N, C * R), B)
  cta warps 4 cluster (C)
  smem cs: bf16[128, 64] align 128
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg s: f32[R, 1] layout rows
    mbarrier.arrive.expect_tx full, bytes=128 * 64 * 2
    if crank == 0:
      tma.load cs[0 : +32, :] <- c[b, 0 : +32, :], full, multicast
    else:
      tma.load cs[SECOND, :] <- c[b, SECOND, :], full, multicast
    mbarrier.wait full, parity=0
    sumsq s <- cs
    store out[b, t * R : +R] <- s, oob=skip
"""


@pytest.mark.parametrize(("second", "found"), [
    ("32 : +96", []),
    ("16 : +112", ["ranks 0 and 1 both write `cs[16, 0]`"]),
])  # fmt: skip
def test_cr132_takes_the_copies_of_a_branch_on_crank_together(registry, second: str, found: list[str]) -> None:
    """Two copies in the arms of an `if` on `crank` fill one stage together, each rank taking its arm.
    (The protocol rules simulate one CTA standing for its peers, which assumes the ranks issue the same
    copies: they do not follow such a branch, so only CR132's findings are looked at here.)"""
    report = verify_source(BRANCHES.replace("SECOND", second), "branches.cake", registry.get("targets", "h200"),
                           registry)  # fmt: skip
    assert [d.message.rsplit(": ", 1)[1] for d in report.diagnostics if d.code == "CR132"] == found
