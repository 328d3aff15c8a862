"""A ``cake run`` killed with SIGKILL at random points, then resumed with ``--resume``, ends with the same best
kernel and the same ledger contents (timestamps and durations aside) as an uninterrupted run of the same seed,
and never starts again a piece of work whose result was recorded.

The runs are real processes (``python -m cake_core.cli``), on the CPU path (no device visible), with a cold
NVRTC cache of their own so that each takes seconds and the kills land inside stage 2."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cake_core.loop.ledger import Ledger


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, CAKE_CACHE_DIR=str(cache), CUDA_VISIBLE_DEVICES="")
    env.pop("CAKE_DEBUG", None)
    return env


def _start(out: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "cake_core.cli", "run", "kmeans-assign", "--target", "h200", "--seed", "7",
           "--workers", "2", "--out", str(out), *extra]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _redone(out: Path) -> list[str]:
    """Work started again after its result was recorded (the journal against the results' times)."""
    db = sqlite3.connect(out / "ledger.sqlite")
    recorded = {f"filter:{c}": t for c, t in db.execute("SELECT candidate, recorded_at FROM filtered")}
    recorded |= {f"dispatch:{i}": t for i, t in db.execute("SELECT impl, recorded_at FROM dispatches")}
    recorded |= {f"generate:{r}": t for r, t in db.execute("SELECT round, MIN(created_at) FROM candidates GROUP BY round")}
    return [w for w, started in db.execute("SELECT work, started_at FROM attempts") if w in recorded and started > recorded[w]]


def test_sigkill_at_random_points_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    p = _start(whole, _env(tmp_path / "cache-whole"))
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    reference = Ledger.open(whole, {})
    want = reference.contents()

    rng = random.Random(20261201)
    killed = tmp_path / "killed"
    env = _env(tmp_path / "cache-killed")
    kills = 0
    for _ in range(5):
        resume = ("--resume",) if (killed / "ledger.sqlite").exists() else ()
        p = _start(killed, env, *resume)
        time.sleep(rng.uniform(0.5, 4.0))
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)  # the run and its stage-2 workers, mid-flight
            kills += 1
        p.communicate(timeout=600)
    assert kills >= 2, "the runs finished before they could be killed: the test proves nothing"
    resume = ("--resume",) if (killed / "ledger.sqlite").exists() else ()
    p = _start(killed, env, *resume)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()

    got = Ledger.open(killed, {}).contents()
    assert got == want
    assert (killed / "best.cake").read_text() == (whole / "best.cake").read_text()
    assert _redone(killed) == []
    sessions = sqlite3.connect(killed / "ledger.sqlite").execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    assert sessions >= 2  # it was resumed, not restarted


@pytest.mark.gpu
def test_sigkill_on_the_gpu_path_then_resume_takes_measurements_from_the_ledger(tmp_path: Path) -> None:
    """On a GPU: kills land in stage 3 too; the resumed run measures each candidate once (what was recorded is
    read back, not measured again) and ends with what an uninterrupted run has, times aside."""
    from cake_core.runtime.device import driver_status

    ok, reason = driver_status()
    if not ok:
        pytest.skip(f"no NVIDIA driver here: {reason}")
    cell = ("--shape", "B=2,N=8192,K=256,D=128")
    env = dict(os.environ)
    whole = tmp_path / "whole"
    p = _start(whole, env, *cell)
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    rng = random.Random(7)
    killed = tmp_path / "killed"
    kills = 0
    for _ in range(4):
        resume = ("--resume",) if (killed / "ledger.sqlite").exists() else cell
        p = _start(killed, env, *resume)
        time.sleep(rng.uniform(2.0, 12.0))
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            kills += 1
        p.communicate(timeout=600)
    resume = ("--resume",) if (killed / "ledger.sqlite").exists() else cell
    p = _start(killed, env, *resume)
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    assert kills >= 1
    assert _redone(killed) == []
    a, b = Ledger.open(whole, {}).contents(), Ledger.open(killed, {}).contents()
    for table in ("meta", "versions", "rounds", "candidates", "diagnostics", "filtered"):
        assert a[table] == b[table], table
    verdicts = "SELECT impl, status, correct FROM dispatches ORDER BY impl"
    assert sqlite3.connect(whole / "ledger.sqlite").execute(verdicts).fetchall() == \
        sqlite3.connect(killed / "ledger.sqlite").execute(verdicts).fetchall()  # fmt: skip


def test_ctrl_c_says_how_to_resume_and_resuming_finishes(tmp_path: Path) -> None:
    out, env = tmp_path / "run", _env(tmp_path / "cache")
    p = _start(out, env)
    deadline = time.monotonic() + 60
    while not (out / "ledger.sqlite").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=600)
    if p.returncode == 0:
        pytest.skip("the run finished before the interrupt landed")
    lines = err.decode().splitlines()
    assert p.returncode == 130 and "Traceback" not in err.decode()
    assert lines[-1] == (f"interrupted: what was recorded stays in {out}; continue with "
                         f"`cake run kmeans-assign --target h200 --out {out} --resume`")  # fmt: skip
    p = _start(out, env, "--resume")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    assert (out / "best.cake").exists()
