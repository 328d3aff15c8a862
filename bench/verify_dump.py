"""Every diagnostic of the 20,000 benchmark mutants, dumped, so that a change can be shown to leave them
byte-identical.

The mutants are those of ``verify_throughput.py``: 10,000 of the corpus (the full core pack only,
through ``CAKE_PLUGINS``) and 10,000 of the wide set (corpus and kmeans-assign schedules, every
installed plugin). Mutant generation goes through the parser, printer and mutation operators, which a
change may touch too, so the texts are kept in an items file made once (``--make-items``) and every
later dump verifies those same texts.

For each text, the dump holds the JSON of every diagnostic (a syntax error's too) and its rendering as
the ``cake verify`` command prints it, one line per kernel.

    python bench/verify_dump.py --make-items ITEMS.json            # once, before the change
    python bench/verify_dump.py ITEMS.json -o BEFORE.jsonl          # before
    python bench/verify_dump.py ITEMS.json -o AFTER.jsonl           # after; then cmp BEFORE AFTER
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchlib import registry


SETS = {"corpus": False, "wide": True}


def make_items(path: Path, count: int, seed: int) -> None:
    """Both sets' texts, each made in a process of its own (the plugin allow-list differs)."""
    items = {}
    for name, wide in SETS.items():
        code = (
            "import json, os, sys; sys.path.insert(0, 'bench');"
            "from verify_throughput import CORE_PLUGINS, make_mutants; from benchlib import registry;"
            f"wide = {wide!r};"
            "os.environ.setdefault('CAKE_PLUGINS', CORE_PLUGINS) if not wide else None;"
            f"print(json.dumps(make_mutants({count}, {seed}, registry(), wide)))"
        )
        env = dict(os.environ)
        env.pop("CAKE_PLUGINS", None)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        items[name] = json.loads(out.stdout)
        print(f"{name}: {len(items[name])} mutants", file=sys.stderr)
    path.write_text(json.dumps(items))


def dump(items_path: Path, which: str, out) -> int:
    from cake_core.convert import unstructure
    from cake_core.diagnostics.render import render_all
    from cake_core.verify.runner import verify_source

    reg = registry()
    targets = {t.name: t for t in reg.values("targets")}
    items = json.loads(items_path.read_text())[which]
    for path, target, text in items:
        diags = verify_source(text, path, targets[target], reg).diagnostics
        line = {"file": path, "target": target, "json": [unstructure(d) for d in diags],
                "text": render_all(diags, {path: text})}  # fmt: skip
        out.write(json.dumps(line, sort_keys=True) + "\n")
    return len(items)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("items", type=Path)
    ap.add_argument("--make-items", action="store_true", help="write the mutant texts to ITEMS and stop")
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", choices=tuple(SETS), help=argparse.SUPPRESS)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args(argv)
    if args.make_items:
        make_items(args.items, args.count, args.seed)
        return 0
    if args.set:  # one set, in this process, to stdout
        if not SETS[args.set]:
            from verify_throughput import CORE_PLUGINS

            os.environ["CAKE_PLUGINS"] = CORE_PLUGINS
        n = dump(args.items, args.set, sys.stdout)
        print(f"{args.set}: {n} kernels", file=sys.stderr)
        return 0
    if args.output is None:
        ap.error("give -o OUTPUT (or --make-items)")
    env = dict(os.environ)
    env.pop("CAKE_PLUGINS", None)
    with args.output.open("w") as out:
        for name in SETS:
            out.flush()
            subprocess.run([sys.executable, __file__, str(args.items), "--set", name], env=env, stdout=out, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
