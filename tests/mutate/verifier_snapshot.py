"""What the verifier says about a fixed set of kernels, recorded once, to keep its behaviour fixed.

The set: every kmeans-assign schedule and every file of the cake-rules-core corpus as they were at
commit ``eebc870`` (the texts are stored in the snapshot, so later edits of those files do not move
it), and a deterministic sample of their mutants (every operator of :mod:`cake_core.mutate`,
integer literals included), stored as line edits of the printed base module.

For each case the snapshot keeps every diagnostic of the type checker and of the rules that were
registered when it was taken (in JSON form, locations included) and, for every kernel model that
type-checks, the verdict of every tile and barrier access (:meth:`KernelDomain.accesses`): status,
witness and the number of size assignments tried — in full where the access is not proved or masked,
as a digest for all of them.

The snapshot was taken *before* the verifier was optimized for speed; optimizations must leave it
unchanged. Regenerate it (``python tests/mutate/verifier_snapshot.py``) only when the verifier's
behaviour changes on purpose, and say so in the commit.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import subprocess
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).parent / "data" / "verifier_snapshot.json"
BASE_COMMIT = "eebc870"
SCHEDULES = "cake_core/problems/kmeans_assign/schedules"
CORPUS = "plugins/verifier_rules/cake-rules-core/tests/corpus"
FIXTURES = ROOT / "plugins/verifier_rules/cake-rules-core/tests/fixture_primitives.py"
#: the rules registered when the snapshot was taken; diagnostics of rules added later are not compared
CORE_RULES = frozenset(f"CR10{i}" for i in range(1, 9))
#: mutants kept per base file (schedules, corpus files)
PER_SCHEDULE, PER_CORPUS_FILE = 45, 14


def fixture_primitives() -> types.ModuleType:
    """The corpus's in-process fixture primitives (loaded as the pack's conftest loads them)."""
    from cake_core import plugins

    return plugins.module_from_file("cake_rules_core_fixture_primitives", FIXTURES)


def registry() -> Any:
    """Every installed plugin and the fixture primitives: the registry the corpus tests use."""
    from cake_core import plugins

    return plugins.load(extra=[fixture_primitives()])


def target_of(text: str) -> str:
    from cake_core.verify.expectations import named_target

    return named_target(text) or "h200"


# ---------------------------------------------------------------------------------------------------
# Observing the verifier
# ---------------------------------------------------------------------------------------------------


def observe(text: str, file: str, target_name: str, reg: Any, codes: frozenset[str] | None) -> dict[str, Any]:
    """Diagnostics (of the type checker and of the rules ``codes`` names; all when None) and access
    verdicts of one text."""
    from cake_core.convert import unstructure
    from cake_core.diagnostics.diagnostic import DiagnosticError
    from cake_core.ir.parser import parse
    from cake_core.ir.sema import check_module
    from cake_core.verify.domain import KernelDomain
    from cake_core.verify.runner import verify
    from cake_core.verify.verdicts import Status

    target = reg.get("targets", target_name)
    try:
        module = parse(text, file)
    except DiagnosticError as exc:
        return {"diagnostics": [unstructure(d) for d in exc.diagnostics], "accesses": [], "digest": ""}
    checked = check_module(module, {p.name: p for p in reg.values("primitives")}, target)
    report = verify(checked, target, reg)
    diags = [unstructure(d) for d in report.diagnostics if codes is None or d.code.startswith("CK") or d.code in codes]
    records: list[list[Any]] = []
    if checked.ok:
        for (kernel, spec), model in checked.models.items():
            for av in KernelDomain(model).accesses():
                v = av.verdict
                w = v.witness
                records.append([
                    kernel, spec.label, av.typed.op.loc.line, av.typed.op.loc.col, av.operand.slot.name,
                    v.status.value, v.samples,
                    None if w is None else [list(map(list, w.sizes)), list(map(list, w.vars)), w.what],
                ])  # fmt: skip
    blob = json.dumps(records, sort_keys=True).encode()
    open_ = [r for r in records if r[5] not in (Status.PROVED.value, Status.MASKED.value)]
    return {"diagnostics": diags, "accesses": open_, "digest": hashlib.sha256(blob).hexdigest()[:20]}


# ---------------------------------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def base_files() -> dict[str, str]:
    """Path -> text of every schedule and corpus file at :data:`BASE_COMMIT`."""
    listed = _git("ls-tree", "-r", "--name-only", BASE_COMMIT, SCHEDULES, CORPUS).split()
    paths = [p for p in listed if p.endswith(".cake")]
    return {p: _git("show", f"{BASE_COMMIT}:{p}") for p in sorted(paths)}


def edits(base: str, mutant: str) -> list[list[Any]]:
    """Line edits turning ``base`` into ``mutant``: ``[i1, i2, new_lines]`` replaces lines i1..i2."""
    a, b = base.splitlines(), mutant.splitlines()
    out: list[list[Any]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append([i1, i2, b[j1:j2]])
    return out


def apply_edits(base: str, changes: list[list[Any]]) -> str:
    lines = base.splitlines()
    for i1, i2, new in reversed(changes):
        lines[i1:i2] = new
    return "\n".join(lines) + "\n"


def _mutant_texts(path: str, text: str, reg: Any) -> Iterator[tuple[str, str]]:
    """(description, printed text) of a deterministic sample of ``text``'s mutants."""
    from cake_core.diagnostics.diagnostic import DiagnosticError
    from cake_core.ir.parser import parse
    from cake_core.ir.printer import print_module
    from cake_core.mutate import EXTRA_OPERATORS, OPERATORS, mutants

    try:
        module = parse(text, path)
    except DiagnosticError:
        return
    prims = {p.name: p for p in reg.values("primitives")}
    base = print_module(module)
    found: dict[str, str] = {}
    for m in mutants(module, prims, OPERATORS + EXTRA_OPERATORS):
        t = print_module(m.module)
        if t != base:
            found.setdefault(t, f"{m.operator}: {m.description} ({m.where})")
    keep = PER_SCHEDULE if path.startswith(SCHEDULES) else PER_CORPUS_FILE
    items = sorted(found.items(), key=lambda kv: kv[1])
    rng = random.Random(path)
    for t, desc in sorted(rng.sample(items, min(keep, len(items))), key=lambda kv: kv[1]):
        yield desc, t


def cases(snapshot: Mapping[str, Any]) -> Iterator[tuple[str, str, str, str, Mapping[str, Any]]]:
    """(case id, file name, target, text, expected observation) of every stored case."""
    bases = snapshot["bases"]
    for case in snapshot["cases"]:
        base = bases[case["base"]]
        text = base["text"] if case["edit"] is None else apply_edits(base["printed"], case["edit"])
        yield case["id"], base["path"], base["target"], text, case["expect"]


def make(reg: Any) -> dict[str, Any]:
    """A new snapshot of the verifier's behaviour (see the module documentation)."""
    from cake_core.diagnostics.diagnostic import DiagnosticError
    from cake_core.ir.parser import parse
    from cake_core.ir.printer import print_module

    codes = frozenset(reg.names("rules")) & CORE_RULES
    bases: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for path, text in base_files().items():
        target = target_of(text)
        try:
            printed = print_module(parse(text, path))
        except DiagnosticError:
            printed = text
        key = path.removeprefix("cake_core/problems/kmeans_assign/").removeprefix("plugins/verifier_rules/")
        bases[key] = {"path": path, "target": target, "text": text, "printed": printed}
        out.append({"id": key, "base": key, "edit": None, "expect": observe(text, path, target, reg, codes)})
        for i, (desc, t) in enumerate(_mutant_texts(path, text, reg)):
            out.append({
                "id": f"{key}~{i}", "base": key, "edit": edits(printed, t), "description": desc,
                "expect": observe(t, path, target, reg, codes),
            })  # fmt: skip
        print(f"{key}: {len(out)} cases so far", file=sys.stderr)
    doc = __doc__.split("\n\n")[0]
    return {"doc": doc, "commit": BASE_COMMIT, "rules": sorted(codes), "bases": bases, "cases": out}


if __name__ == "__main__":
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    data = make(registry())
    SNAPSHOT.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"{len(data['cases'])} cases written to {SNAPSHOT}", file=sys.stderr)
