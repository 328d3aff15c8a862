"""What the benchmark scripts of this folder share: where the kernels they read live, the registry the
corpus is verified with, and the commit a record names.

The scripts run as ``python bench/NAME.py``, so this folder is on their import path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEDULES = ROOT / "cake_core/problems/kmeans_assign/schedules"
CORPUS = ROOT / "plugins/verifier_rules/cake-rules-core/tests/corpus"
FIXTURES = ROOT / "plugins/verifier_rules/cake-rules-core/tests/fixture_primitives.py"


def registry() -> Any:
    """Every installed plugin and the corpus's fixture primitives (some corpus files use them)."""
    from cake_core import plugins

    return plugins.load(extra=[plugins.module_from_file("cake_rules_core_fixture_primitives", FIXTURES)])


def commit() -> str:
    """The short hash of HEAD, with ``+uncommitted`` when the tree has changes; ``unknown`` outside git."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.strip()  # fmt: skip
        return rev + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_record(out: Path, name: str, record: dict[str, Any]) -> Path:
    """``record`` as ``OUT/<date>-NAME[-LABEL].json`` (its ``date`` and ``label``), said on stderr."""
    out.mkdir(parents=True, exist_ok=True)
    suffix = f"-{record['label']}" if record.get("label") else ""
    path = out / f"{record['date']}-{name}{suffix}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"-> {path}", file=sys.stderr)
    return path
