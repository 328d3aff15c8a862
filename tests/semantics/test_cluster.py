"""Thread-block clusters in the IR and the interpreter: the words parse and print back, the clustered
kmeans-assign schedules (pipe and explicit form) pass the oracle in the interpreter, and the
interpreter finds a release that forgets the peer CTA (a race, or a deadlock)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cake_core import plugins
from cake_core.errors import CakeUserError
from cake_core.ir import serialize
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.ir.sema import check_module
from cake_core.problems import kmeans_assign
from cake_core.semantics import run_program
from cake_core.verify.interp_gate import run_gate

SCHEDULES = Path(kmeans_assign.__file__).parent / "schedules"
PIPE = SCHEDULES / "hopper_cluster.cake"
EXPLICIT = SCHEDULES / "explicit" / "hopper_cluster.cake"


def _gate(text: str, path: str):
    reg = plugins.registry()
    return run_gate(reg.get("problems", "kmeans-assign"), parse(text, path), reg)


@pytest.mark.parametrize("path", [PIPE, EXPLICIT], ids=["pipe", "explicit"])
def test_clustered_schedule_round_trips(path: Path) -> None:
    text = path.read_text()
    module = parse(text, str(path))
    printed = print_module(module)
    for words in ("cluster (C)", "crank * SLICE : +SLICE", "], multicast"):
        assert words in printed
    assert print_module(parse(printed)) == printed
    back = serialize.from_json(serialize.to_json(module))
    assert print_module(back) == printed


def test_pipe_cluster_keyword_and_flags_print_back() -> None:
    module = parse(PIPE.read_text())
    (pipe,) = [p for k in module.kernels for p in k.pipes if p.name == "cring"]
    assert pipe.cluster
    assert "pipe cring: producer -> consumers of cs, csq cluster" in print_module(module)
    explicit = print_module(parse(EXPLICIT.read_text()))
    assert "mbarrier.arrive cempty[s], cluster" in explicit


@pytest.mark.parametrize("path", [PIPE, EXPLICIT], ids=["pipe", "explicit"])
def test_clustered_schedule_passes_the_oracle_in_the_interpreter(path: Path) -> None:
    report = _gate(path.read_text(), str(path))
    assert report.ok, [d.message for d in report.diagnostics]
    assert len(report.runs) >= 2


def test_a_pipe_that_is_not_the_clusters_races_with_the_peers_multicast() -> None:
    # the empty barrier counts only this CTA's consumers: the peer refills a stage this CTA still reads
    text = PIPE.read_text().replace("of cs, csq cluster", "of cs, csq")
    report = _gate(text, "no_cluster_pipe.cake")
    codes = {d.code for d in report.diagnostics}
    assert "CS003" in codes, codes
    assert any("cluster rank" in d.message for d in report.diagnostics)


def test_an_arrival_that_forgets_the_peer_deadlocks() -> None:
    text = EXPLICIT.read_text().replace("mbarrier.arrive cempty[s], cluster", "mbarrier.arrive cempty[s]")
    report = _gate(text, "forgets_peer.cake")
    codes = {d.code for d in report.diagnostics}
    assert "CS004" in codes, codes


def test_a_copy_that_is_not_multicast_leaves_the_peers_half_unwritten() -> None:
    text = PIPE.read_text().replace("+SLICE, :], multicast", "+SLICE, :]")
    report = _gate(text, "no_multicast.cake")
    assert "CS002" in {d.code for d in report.diagnostics}


CLUSTER_SYNC = """
kernel k(y: global f32[N, 32])
  domain N >= 1
  grid (g) over (GRID)
  cta warps 1 cluster (2)
  role main warps 0..1:
    reg v: f32[8, 32] layout rows
    fill v, value=1.0
    SYNC
    store y[g * 8 : +8, :] <- v, oob=skip
"""


def _cluster_kernel(sync: str, grid: int = 4):
    prims = {p.name: p for p in plugins.registry().values("primitives")}
    checked = check_module(parse(CLUSTER_SYNC.replace("SYNC", sync).replace("GRID", str(grid))), prims)
    assert checked.ok, [d.message for d in checked.diagnostics]
    return checked


def test_cluster_sync_runs_every_cta_of_each_cluster_together() -> None:
    result = run_program(_cluster_kernel("cluster.sync"), {}, {"N": 32}, policy="random", seed=3)
    assert result.ok, result.summary()
    assert result.ctas == 4
    np.testing.assert_array_equal(result.outputs["y"], np.ones((32, 32), np.float32))


def test_a_cluster_sync_one_rank_skips_deadlocks() -> None:
    result = run_program(_cluster_kernel("if crank == 0:\n      cluster.sync"), {}, {"N": 32})
    (dead,) = result.by_code("CS004")
    assert "every CTA of the cluster" in dead.message and "cluster rank 1 has finished" in dead.message


def test_a_grid_of_part_clusters_is_refused() -> None:
    with pytest.raises(CakeUserError, match="not a multiple of its cluster size 2"):
        run_program(_cluster_kernel("cluster.sync", grid=3), {}, {"N": 24})


def test_the_protocol_replay_counts_the_peers_arrivals_and_bytes() -> None:
    # the replay runs one CTA of a cluster standing for all: cluster arrivals and multicast bytes arrive C
    # times, multicast writes cover every rank's slice; an arrival that forgets the peer is CR111
    from cake_core.verify.runner import verify_source

    target = plugins.registry().get("targets", "h200")
    replayed = {"CR111", "CR112", "CR127"}
    one = EXPLICIT.read_text().replace("T in {bf16, f16}", "T in {bf16}").replace("D in {64, 128, 256}", "D in {64}")
    assert one.count("D in {64}") == 3  # one specialization of each kernel: the program's and both kernels'
    good = verify_source(one, str(EXPLICIT), target)
    assert not replayed & {d.code for d in good.diagnostics}, [d.message for d in good.diagnostics]
    text = one.replace("mbarrier.arrive cempty[s], cluster", "mbarrier.arrive cempty[s]")
    bad = verify_source(text, "forgets_peer.cake", target)
    assert "CR111" in {d.code for d in bad.diagnostics}


def test_a_cluster_of_more_than_one_dimension_is_refused_in_one_line() -> None:
    prims = {p.name: p for p in plugins.registry().values("primitives")}
    flat = CLUSTER_SYNC.replace("SYNC", "cluster.sync").replace("GRID", "4")
    assert check_module(parse(flat.replace("cluster (2)", "cluster (2, 1)")), prims).ok
    checked = check_module(parse(flat.replace("cluster (2)", "cluster (2, 2)")), prims)
    (error,) = [d for d in checked.diagnostics if d.is_error]
    assert "clusters are one-dimensional here" in error.message
