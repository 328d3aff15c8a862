"""``cake run kmeans-assign --target h200 --agent search --from naive.cake`` on the CPU path, through the command:
the run completes, every later candidate is the agent's with its parent and chain recorded (the chain replays
from naive.cake to the candidate), refused applications are not retried, and one ``--seed`` makes one ledger."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cake_agent_search.chain import chain_of, read_chain, replay
from cake_agent_search.steer import refuses
from cake_core import cli, pipeline
from cake_core.ir.hashing import structural_hash
from cake_core.loop.agent import Parent
from cake_core.loop.ledger import Ledger
from cake_core.runtime import device

BUDGET = 14


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU path, also on a machine with a GPU."""
    monkeypatch.setattr(device, "driver_status", lambda **_: (False, "the CPU path, by the test"))


def _run(out: Path, seed: int, naive: Path) -> None:
    rc = cli.main(["run", "kmeans-assign", "--target", "h200", "--agent", "search", "--from", str(naive),
                   "--budget", str(BUDGET), "--seed", str(seed), "--out", str(out), "--workers", "1"])  # fmt: skip
    assert rc == 0


def test_a_run_evolves_from_naive_and_one_seed_makes_one_ledger(use_plugins, const_ladder, unmask,
                                                                schedules: Path, tmp_path: Path) -> None:  # fmt: skip
    registry = use_plugins(tactics=[const_ladder(), unmask()])
    naive = schedules / "naive.cake"
    _run(tmp_path / "a", 3, naive)
    db = sqlite3.connect(tmp_path / "a" / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT * FROM candidates ORDER BY id").fetchall()
    assert len(rows) == BUDGET
    root = pipeline.load(naive).module
    assert (rows[0]["round"], rows[0]["origin"], rows[0]["hash"]) == (0, "from", structural_hash(root))
    assert len({r["round"] for r in rows}) >= 3  # the seed, then rounds that build on the agent's own
    tactics, target = registry.by_name("tactics"), registry.get("targets", "h200")
    earlier: dict[str, sqlite3.Row] = {rows[0]["hash"]: rows[0]}
    for r in rows[1:]:
        assert r["origin"] == "agent:search" and r["round"] >= 1
        parent = earlier[r["parent"]]
        assert parent["round"] < r["round"]
        chain = read_chain(r["how"])
        assert chain.root == rows[0]["hash"] and len(chain.steps) > len(chain_of(_parent(parent)).steps)
        module, applied = replay(root, chain.steps, tactics, target)
        assert applied == chain.steps and structural_hash(module) == r["hash"]
        earlier[r["hash"]] = r
    # a refused application is not applied again once its finding is routed
    hows = {r["id"]: r["how"] for r in rows}
    refused = [(f["round"], read_chain(hows[f["candidate"]]).last.key)
               for f in db.execute("SELECT round, candidate, kind FROM findings WHERE destination = 'candidate'")
               if refuses(f["kind"])]  # fmt: skip
    for r in rows[1:]:
        new = read_chain(r["how"]).steps[len(chain_of(_parent(earlier[r["parent"]])).steps):]
        assert not [key for rnd, key in refused if rnd < r["round"] and key in {s.key for s in new}]
    # the unmasked stores, refused in round 1, were on offer on every later parent
    assert {key for _, key in refused} == {"test-unmask@assign.all.6()", "test-unmask@centroid_norms.all.2()"}
    stages = json.loads((tmp_path / "a" / "run.json").read_text())["summary"]["stages"]
    assert stages["generate"].startswith(f"{BUDGET} distinct candidate(s)")
    _run(tmp_path / "b", 3, naive)
    assert Ledger.open(tmp_path / "a", {}).contents() == Ledger.open(tmp_path / "b", {}).contents()


def _parent(row: sqlite3.Row) -> Parent:
    """A recorded candidate as the loop hands it to the agent (module, hash, how)."""
    module = pipeline.load_text(row["source"], f"{row['name']}.cake").module
    return Parent(module, row["hash"], row["name"], None, False, row["how"])


def test_the_agent_registers_through_its_entry_point(registry) -> None:
    reg = registry.registration("agents", "search")
    assert (reg.plugin.name, reg.plugin.distribution, reg.plugin.version) == ("search", "cake-agent-search", "0.3.0")
    assert reg.obj.tactics is None  # it draws from the registered tactics
