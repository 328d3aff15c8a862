"""The pack as a plugin: discovery through the `cake` entry-point group, rule declarations and their
documentation, the corpus each rule must have, and what findings say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cake_core import cli, plugins
from cake_core.diagnostics.diagnostic import Severity
from cake_core.verify.expectations import check_file, parse_expectations
from cake_core.verify.runner import verify_source

import cake_rules_core

CORPUS = Path(__file__).parent / "corpus"
DISTRIBUTION = "cake-rules-core"

#: Ids are forever: this table changes only by adding rows.
IDS = {
    "CR101": "missing-feature",
    "CR102": "smem-over-limit",
    "CR103": "threads-and-warps",
    "CR104": "register-budget",
    "CR105": "cp-async-size-alignment",
    "CR106": "vector-access-alignment",
    "CR107": "mma-shape-dtype",
    "CR108": "unmasked-out-of-bounds",
    "CR109": "warpgroup-alignment",
    "CR110": "setmaxnreg-limits",
    "CR111": "mbarrier-arrival-count",
    "CR112": "expect-tx-bytes",
    "CR113": "mbarrier-parity",
    "CR114": "wait-never-completes",
    "CR115": "read-before-full",
    "CR116": "overwrite-before-empty",
    "CR117": "missing-proxy-fence",
    "CR118": "tma-box-and-alignment",
    "CR119": "wgmma-shape-and-operands",
    "CR120": "swizzle-mismatch",
    "CR121": "pipe-trip-counts",
    "CR122": "pipe-release",
    "CR123": "pipe-copy-unacquired",
    "CR124": "pipe-stage-outside",
    "CR125": "release-before-instance-sync",
    "CR126": "missing-instance-barrier",
    "CR127": "read-of-unwritten-shared",
    "CR128": "padded-reduction",
    "CR129": "output-coverage-hole",
    "CR130": "overlapping-output-writes",
    "CR131": "cluster-shape",
    "CR132": "multicast-mask",
    "CR133": "multicast-release",
    "CR134": "cluster-barrier-arrivals",
}


def test_rules_register_through_the_entry_point(plain_registry: plugins.Registry) -> None:
    mine = [n for n in plain_registry.names("rules") if plain_registry.registration("rules", n).plugin.distribution
            == DISTRIBUTION]  # fmt: skip
    assert mine == sorted(IDS) == [cls.name for cls in cake_rules_core.RULES]
    for rule_id, slug in IDS.items():
        reg = plain_registry.registration("rules", rule_id)
        assert reg.plugin.distribution == DISTRIBUTION and reg.plugin.version == cake_rules_core.__version__
        assert reg.obj.slug == slug
        assert reg.obj.severity is Severity.ERROR  # every rule of this pack is a hard gate


@pytest.mark.parametrize("cls", cake_rules_core.RULES, ids=lambda c: c.name)
def test_rule_declaration_is_well_formed(cls) -> None:
    rule = cls()
    assert rule.problems() == []
    # the example that fails and the fix are code blocks
    example = rule.explanation.split("## Example", 1)[1].split("## Use instead", 1)
    assert "```" in example[0] and "```" in example[1]


@pytest.mark.parametrize("rule_id", sorted(IDS))
def test_every_rule_has_two_invalid_kernels_and_a_near_miss(rule_id: str) -> None:
    files = sorted((CORPUS / rule_id).glob("*.cake"))
    invalid = [f for f in files if f.name.startswith("invalid_")]
    valid = [f for f in files if f.name.startswith("valid_")]
    assert len(invalid) >= 2 and len(valid) >= 1, files
    for f in invalid:
        _, expected = parse_expectations(f.read_text(), str(f))
        assert any(e.code == rule_id for e in expected), f"{f.name} expects no {rule_id}"
    for f in valid:
        _, expected = parse_expectations(f.read_text(), str(f))
        assert expected == (), f"{f.name} is a near miss: it must expect nothing"


@pytest.mark.parametrize("rule_id", sorted(IDS))
def test_explain_prints_the_rule(rule_id: str, capsys: pytest.CaptureFixture) -> None:
    plugins.reset()
    assert cli.main(["explain", rule_id.lower()]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{rule_id} ({IDS[rule_id]}, error, {DISTRIBUTION} {cake_rules_core.__version__}): ")
    assert "## What it does" in out and "## Why is this bad?" in out


def _diags(registry, rel: str):
    outcome = check_file(CORPUS / rel, registry)
    assert outcome.ok, outcome.explain()
    return outcome.diagnostics


# -- what findings say -------------------------------------------------------------------------------


def test_cr101_names_the_target_and_its_architecture(registry) -> None:
    (d,) = _diags(registry, "CR101/invalid_wgmma_on_b200.cake")
    assert d.message == (
        "`wgmma` and 2 more operations in kernel `scores` need the feature `wgmma`, which target `b200` "
        "(sm_100a, blackwell) does not have"
    )
    assert d.plugin == DISTRIBUTION and "tcgen05" in (d.help or "")
    assert d.label == "the first of 3 needing `wgmma`"
    assert [(s.loc.line, s.message) for s in d.secondary] == [(18, "also needs `wgmma`"), (19, "also needs `wgmma`")]


def test_cr101_one_error_per_missing_feature_counting_the_operations(registry) -> None:
    """Eleven operations lack three features: three errors, each at the first operation that needs
    its feature, the next three shown as spans and the rest listed by line."""
    tx, tma, wgmma = _diags(registry, "CR101/invalid_pipeline_on_a100.cake")
    assert [(d.code, d.primary.line) for d in (tx, tma, wgmma)] == [("CR101", 16), ("CR101", 17), ("CR101", 29)]
    assert tx.message.startswith("`mbarrier.arrive.expect_tx` and 7 more operations in kernel `pipe` need the "
                                 "feature `mbarrier.tx`, which target `a100`")  # fmt: skip
    assert [s.loc.line for s in tx.secondary] == [17, 20, 21]
    assert tx.notes[-1] == (
        "4 more not shown: `tma.load` (line 22), `mbarrier.wait` (lines 25, 28), `mbarrier.arrive` (line 32)"
    )
    assert tma.message.startswith("`tma.load` and 1 more operation in kernel `pipe` need the feature `tma`")
    assert [s.loc.line for s in tma.secondary] == [22] and len(tma.notes) == 1
    assert wgmma.label == "the first of 3 needing `wgmma`"


LONE_TMA = """
kernel copy(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1, N % 64 == 0
  grid (t) over (N / 64)
  cta warps 4
  smem xs: bf16[64, 64] swizzle 128B
  barrier full: mbarrier count 1
  role main warps 0..4:
    reg v: f32[64] layout rows
    tma.load xs <- x[t * 64 : +64, :], full
    sumsq v <- xs
    store out[t * 64 : +64] <- v
"""


def test_cr101_features_needed_by_the_same_operations_share_one_error(registry) -> None:
    # a lone TMA copy needs `mbarrier.tx` and `tma`: one error naming both, as for any one operation
    diags = verify_source(LONE_TMA, "copy.cake", registry.get("targets", "a100"), registry).diagnostics
    (d,) = [d for d in diags if d.code == "CR101"]
    assert d.message == (
        "`tma.load` needs the features `mbarrier.tx`, `tma`, which target `a100` (sm_80, ampere) does not have"
    )
    assert (d.primary.line, d.label, d.secondary) == (10, "needs `mbarrier.tx`, `tma`", ())


def test_cr102_names_the_specialization_bytes_limit_and_largest_buffers(registry) -> None:
    (d,) = _diags(registry, "CR102/invalid_deep_ring_on_a10.cake")
    assert d.message == (
        "kernel `assign` needs 110592 bytes of shared memory, over the 101376-byte maximum per block on "
        "`a10` (sm_86) (with D=256)"
    )
    assert [s.message for s in d.secondary] == [
        "`xs`: 67584 bytes", "`cs`: 40960 bytes (4 stages of 10240)", "`red`: 2048 bytes",
    ]  # fmt: skip
    assert [s.loc.line for s in d.secondary] == [9, 10, 11]


def test_cr104_says_the_bound_is_a_lower_bound(registry) -> None:
    (d,) = _diags(registry, "CR104/invalid_per_thread.cake")
    assert "at least 272 registers per thread" in d.message
    assert any("lower bound" in note for note in d.notes)


def test_cr105_names_a_size_that_misaligns(registry) -> None:
    pitch = [d for d in _diags(registry, "CR105/invalid_row_pitches.cake") if "rows of `x`" in d.message]
    assert len(pitch) == 1 and pitch[0].message.endswith("not a multiple of 16 when K=65")
    assert pitch[0].help is not None and "`K % 8 == 0`" in pitch[0].help


def test_cr108_names_sizes_and_loop_indices(registry) -> None:
    diags = _diags(registry, "CR108/invalid_loop_past_end.cake")
    assert [d.message for d in diags] == [
        "`fixture.ld` reads `c[k : +1, :]` out of bounds when K=1 (at k=1): in dimension 1, the slice is at 1, "
        "past the extent `K` = 1",
        "`sumsq` reads `c[j : +1, :]` out of bounds when K=1 (at j=1): in dimension 1, the slice is at 1, "
        "past the extent `K` = 1",
    ]
    assert re.search(r"mask it \(`oob=zero`\)", diags[1].help or "")


def test_cr131_points_at_the_grid_with_the_sizes_that_break_it(registry) -> None:
    (d,) = _diags(registry, "CR131/invalid_ragged_grid.cake")
    assert d.message == ("kernel `norms`'s grid is not a whole number of clusters of 2 along `t` (x) when N=1: "
                         "the extent of `t` is 1")  # fmt: skip
    assert d.primary.line == 7 and d.label == "`cdiv(N, R)` must be a multiple of 2"
    assert [s.loc.line for s in d.secondary] == [8]


def test_cr132_names_the_element_and_the_ranks(registry) -> None:
    hole, overlap = _diags(registry, "CR132/invalid_slices.cake")
    assert hole.message.endswith("no rank writes `cs[64, 0]`")
    assert overlap.message.endswith("ranks 0 and 1 both write `cs[32, 0]`")
    assert "rank 0 [0..63, 0..63]; rank 1 [32..95, 0..63]" in overlap.notes[0]


def test_cr134_names_the_ctas_and_roles_that_differ(registry) -> None:
    (d,) = _diags(registry, "CR134/invalid_uneven_tiles.cake")
    assert "role `all` of the CTA at first grid index 0 reaches the cluster barriers once" in d.message
    assert "role `all` of the CTA at first grid index 1 0 times" in d.message
