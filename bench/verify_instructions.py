"""Benchmark (not a timed test): instructions per kernel of parse + verify, counted by callgrind.

The companion of ``verify_throughput.py``. A wall-clock rate on a shared machine moves by a third from
one pass to the next (other tenants, not this process: no steal time shows in ``/proc/stat``), so a
change of a few percent cannot be told from it. Valgrind's callgrind counts the instructions the
process executes: the same count, to within ~0.1%, whatever else the machine runs. It is the measure
to compare two versions of the verifier by, side by side on the same kernels.

What is counted: the first ``--count`` (1,000) of ``verify_throughput.py``'s mutants (the same seed, the
same 10,000-mutant set, corpus kernels, the full core pack), parsed and verified in one process under
the ``cake`` command's garbage-collector setting, after a warm-up of 50 other mutants of the set;
minus the same process run with none measured (start-up, plugin loading and the warm-up). Bytecode is
compiled beforehand and ``PYTHONHASHSEED`` fixed, so that two runs of one tree count alike.

``--against REV`` (repeatable) counts the same kernels with the code of another commit, checked out
in a temporary git worktree: its ``cake_core`` and plugins come first on the import path, while this
checkout's scripts, corpus and fixture primitives are used for all (so REV must have
``cake_core.plugins.module_from_file``). A REV's C extensions are built in its worktree first (this
checkout runs as installed). Every run records the compiled parts it ran with; the record gives every
tree's count and the ratio of each REV's count to this tree's.

Writes ``bench/results/<date>-verify-instructions.json``. Needs ``valgrind`` on the PATH; takes about two
minutes a tree for 1,000 kernels.

    python bench/verify_instructions.py [--count 1000] [--seed 0] [--against REV ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib import ROOT, commit

#: the plugin distributions whose source trees go on the import path for a tree under test
PLUGIN_DIRS = ("plugins/targets/cake-targets-nvidia", "plugins/verifier_rules/cake-rules-core")
#: mutants of the set the warm-up verifies (outside the measured ones for any --count up to 5,000)
WARM_UP = slice(5000, 5050)


def _child(items_file: str, count: int) -> None:
    """Inside valgrind: verify the warm-up mutants, then the first ``count`` of the set."""
    import verify_throughput as vt
    from benchlib import registry

    import cake_core
    from cake_core import gcpolicy

    tree = Path(os.environ["CAKE_BENCH_TREE"])
    if not Path(cake_core.__file__).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"cake_core was imported from {cake_core.__file__}, not from {tree}")
    items = [tuple(x) for x in json.loads(Path(items_file).read_text())]
    # which compiled parts this tree's code runs with (both are optional at install)
    compiled = [name for name in ("cake_core.ir._scan", "cake_core.ir._make") if importlib.util.find_spec(name)]
    print(f"compiled parts: {','.join(compiled) or 'none'}", file=sys.stderr)
    reg = registry()
    gcpolicy.configure()
    vt.measure(items[WARM_UP], reg)
    vt.measure(items[:count], reg)


def _instructions(tree: Path, items_file: Path, count: int) -> int:
    """Instructions callgrind counts in one child process verifying ``count`` mutants with ``tree``'s code."""
    env = dict(os.environ, PYTHONHASHSEED="0", CAKE_BENCH_TREE=str(tree))
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *(str(tree / d) for d in PLUGIN_DIRS)])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--child", str(items_file), str(count)]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=ROOT / "bench", capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    parts = re.search(r"compiled parts: (\S+)", done.stderr)
    if done.returncode != 0 or found is None or parts is None:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"error: the counted run with {tree} failed: {tail[0]}")
    return int(found.group(1)), parts.group(1)


def _count_tree(tree: Path, items_file: Path, count: int, build: bool) -> dict[str, Any]:
    """The counts of one tree; with ``build``, its C extensions built in place first (a checked-out
    commit has none), so that it runs as an install of it would where a compiler is found."""
    if build and (tree / "setup.py").exists():
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, check=True,
                       capture_output=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "cake_core"), str(tree / "plugins")],
                   check=True, capture_output=True)  # fmt: skip
    startup, _ = _instructions(tree, items_file, 0)
    total, compiled = _instructions(tree, items_file, count)
    return {"instructions_total": total, "instructions_startup": startup,
            "instructions_per_kernel": round((total - startup) / count), "compiled_parts": compiled}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--against", action="append", default=[], metavar="REV", help="also count with this commit's code")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args(argv)
    if not 1 <= args.count <= WARM_UP.start:
        ap.error(f"--count takes 1 to {WARM_UP.start}")
    if shutil.which("valgrind") is None:
        print("error: valgrind is not on the PATH (callgrind counts the instructions)", file=sys.stderr)
        return 2

    import verify_throughput as vt
    from benchlib import registry

    from cake_core.plugins import ALLOW_ENV

    os.environ[ALLOW_ENV] = vt.CORE_PLUGINS
    items = vt.make_mutants(10_000, args.seed, registry())
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cake-verify-instructions-") as tmp:
        items_file = Path(tmp) / "items.json"
        items_file.write_text(json.dumps(items))
        trees: list[tuple[str, Path]] = [(commit(), ROOT)]
        for rev in args.against:
            where = Path(tmp) / f"tree-{len(trees)}"
            made = subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], cwd=ROOT,
                                  capture_output=True, text=True)  # fmt: skip
            if made.returncode != 0:
                print(f"error: cannot check out {rev}: {made.stderr.strip()}", file=sys.stderr)
                return 2
            short = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True,
                                   text=True).stdout.strip()  # fmt: skip
            trees.append((short, where))
        try:
            for name, tree in trees:
                print(f"counting {name} ...", file=sys.stderr)
                runs.append({"commit": name, **_count_tree(tree, items_file, args.count, build=tree != ROOT)})
        finally:
            for _, tree in trees[1:]:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    head = runs[0]["instructions_per_kernel"]
    record = {
        "benchmark": "verify-instructions",
        "date": dt.date.today().isoformat(),
        "definition": "issue 4: corpus mutants, the full core pack (cake-rules-core, cake-targets-nvidia)",
        "method": f"valgrind --tool=callgrind; the first {args.count} of verify_throughput.py's 10,000 mutants "
        f"(seed {args.seed}) after a 50-mutant warm-up, minus the same process with none measured; "
        "PYTHONHASHSEED=0, bytecode compiled beforehand",
        "machine": vt._machine(),
        "runs": runs,
        "ratios": {r["commit"]: round(r["instructions_per_kernel"] / head, 3) for r in runs[1:]},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{record['date']}-verify-instructions.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    for r in runs:
        print(f"{r['commit']}: {r['instructions_per_kernel'] / 1e6:.2f} M instructions per kernel")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], int(sys.argv[3]))
        raise SystemExit(0)
    raise SystemExit(main())
