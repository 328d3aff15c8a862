"""CR127 and CR128 against bugs planted in the committed schedules, and what their findings say."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import cli
from cake_core.verify.expectations import check_file
from cake_core.verify.runner import verify_source

SCHEDULES = Path(cli.__file__).parent / "problems" / "kmeans_assign" / "schedules"
CORPUS = Path(__file__).parent / "corpus"


def _diags(registry, rel: str):
    outcome = check_file(CORPUS / rel, registry)
    assert outcome.ok, outcome.explain()
    return outcome.diagnostics


def _verify(registry, text: str, name: str = "planted.cake") -> list:
    target = registry.get("targets", "h200")
    return [d for d in verify_source(text, name, target, registry).diagnostics if d.is_error]


def test_cr127_names_the_region_never_written_and_the_sizes(registry) -> None:
    (d,) = _diags(registry, "CR127/invalid_half_the_rows.cake")
    assert "4096 of the 8192 elements it reads, within `xs[64..127, 0..63]`, are written by no operation" in d.message
    assert d.message.endswith("; seen at N=1")
    assert [s.loc.line for s in d.secondary] == [11]  # the copy that writes only part of it


def test_cr127_says_when_nothing_writes_the_buffer(registry) -> None:
    (d,) = _diags(registry, "CR127/invalid_consumer_reads_the_other_ring.cake")
    assert "no operation of the CTA writes `cs` at all (`cs[0][0..63, 0..63]` is read)" in d.message
    assert "(at kt=0)" in d.message


def test_cr128_names_the_load_its_extent_and_a_witness(registry) -> None:
    (d,) = _diags(registry, "CR128/invalid_tma_centroids_without_limit.cake")
    assert "may be the zero-filled padding of `tma.load c[kt * BN : +BN, :]` past `K` when K=1" in d.message
    assert [s.loc.line for s in d.secondary] == [22]
    assert d.help is not None and "limit=K" in d.help


@pytest.mark.parametrize("name", ["hopper.cake", "hopper_overlap.cake", "explicit/hopper.cake"])
def test_dropping_the_limit_of_a_committed_schedule(registry, name: str) -> None:
    text = (SCHEDULES / name).read_text()
    assert not {d.code for d in _verify(registry, text)} & {"CR127", "CR128"}  # before: clean
    bad = _verify(registry, text.replace(", limit=K", ""))
    assert {d.code for d in bad} == {"CR128"}  # after: the padded centroids are named, nothing else
    assert all("past `K` when K=1" in d.message for d in bad)


def test_a_stage_no_copy_fills_in_a_committed_schedule(registry) -> None:
    text = (SCHEDULES / "hopper.cake").read_text()
    bad = _verify(registry, text.replace("        tma.load csq[s] <- c_sq[b, kt * BN : +BN]\n", ""))
    assert [d.code for d in bad] == ["CR127"]
    assert "no operation of the CTA writes `csq` at all" in bad[0].message


def test_a_ring_stage_never_filled_with_cp_async(registry) -> None:
    # the prologue fills stages 0 and 1 of the three; without the copy inside the loop stage 2 is read empty
    text = (SCHEDULES / "ampere.cake").read_text()
    planted = text.replace("      if j < NT:\n        cp.async cs[j % S] <- c[b, j / KC * BN : +BN, j % KC * BK : +BK], "
                           "oob=zero\n", "")  # fmt: skip
    assert planted != text
    bad = _verify(registry, planted)
    assert "CR127" in {d.code for d in bad}
    assert any("`cs[2]" in d.message for d in bad if d.code == "CR127")
