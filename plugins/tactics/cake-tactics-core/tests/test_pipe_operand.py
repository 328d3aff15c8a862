"""The pipe-operand tactic: a consumer's per-stage global slice staged through the pipe. Input and output
pass the verifier and the interpreter gate against the problem's oracle (ragged K included, where the
padded rows and the moved mask matter), and the precondition refuses what it must."""

from __future__ import annotations

from pathlib import Path

import attrs

from cake_core import plugins
from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module

from cake_tactics_core.judge import judge

DATA = Path(__file__).parent / "data"
PROBLEMS = Path(plugins.__file__).parent / "problems"


def _load(path: Path) -> n.Module:
    return parse(path.read_text(encoding="utf-8"), str(path))


def _target(name: str = "h200"):
    return plugins.registry().get("targets", name)


def _passes(problem: str, module: n.Module) -> str:
    """The verifier for h200 and the interpreter gate with ``problem``'s oracle pass ``module``."""
    text, errors = judge(problem, module)
    assert not errors, errors
    return text


def _tactic():
    return plugins.registry().get("tactics", "pipe-operand")


def test_the_centroid_norms_move_into_the_centroid_ring() -> None:
    before = _load(DATA / "hopper_unstaged.cake")
    _passes("kmeans-assign", before)
    apps = _tactic().applications(before, _target())
    assert [a.site for a in apps] == ["assign:consumers:argmin.update:c_sq[b, kt * BN : +BN]"]
    after = _tactic().apply(before, _target(), apps[0])
    text = _passes("kmeans-assign", after)
    # the ring joins the pipe the centroid tiles come through; the producer copies, the consumer reads it
    assert "smem c_sq_s: f32[S][BN] align 128" in text
    assert "pipe cring: producer -> consumers of cs, c_sq_s" in text
    assert "tma.load c_sq_s[s] <- c_sq[b, kt * BN : +BN]" in text
    assert "argmin.update bv, bi <- acc, c_sq_s[s], base=kt * BN, scale=-2.0, limit=K" in text
    # K is any size: the buffer's rows are padded to 16 bytes, and both kernels take the padded length
    assert "buffer c_sq: global f32[B, cdiv(K, 4) * 4]" in text
    assert text.count("c_sq: global f32[B, KP]") == 2 and text.count("KP % 4 == 0, KP >= K") == 2
    # nothing is left to stage
    assert _tactic().applications(after, _target()) == []


def test_the_committed_hopper_schedule_has_nothing_left_to_stage() -> None:
    hopper = _load(PROBLEMS / "kmeans_assign" / "schedules" / "hopper.cake")
    assert _tactic().applications(hopper, _target()) == []


def test_a_target_without_tma_is_refused() -> None:
    assert _tactic().applications(_load(DATA / "hopper_unstaged.cake"), _target("a100")) == []


def test_a_program_parameter_is_never_padded() -> None:
    """Where the slice's tensor is the caller's (a program parameter) and its rows need not start on 16 bytes,
    nothing may pad it: the rewrite would need a TMA copy over unaligned rows, and is not offered."""
    before = _load(DATA / "hopper_unstaged.cake")
    program = before.program
    assert program is not None
    param = n.Param("c_sq", "global", "f32", (n.Name("B"), n.Name("K")))
    program = attrs.evolve(program, params=(*program.params, param), buffers=())
    assert _tactic().applications(attrs.evolve(before, program=program), _target()) == []


def test_an_operation_that_cannot_take_the_mask_is_refused() -> None:
    """Without `oob=skip` (here: no mask at all) there is no mask to move into `limit`."""
    before = _load(DATA / "hopper_unstaged.cake")
    text = print_module(before).replace(", oob=skip\n        pipe.release", "\n        pipe.release")
    assert "oob=skip\n        pipe.release" not in text
    assert _tactic().applications(parse(text, "unmasked.cake"), _target()) == []


def _walk(module: n.Module, *steps: tuple[str, str]) -> n.Module:
    """Apply, in order, the application of each named tactic whose key contains the given text."""
    reg = plugins.registry()
    for name, pick in steps:
        tactic = reg.get("tactics", name)
        app = next(a for a in tactic.applications(module, _target()) if pick in a.key)
        module = tactic.apply(module, _target(), app)
    return module


def test_from_the_naive_schedules_of_two_problems_the_release_waits_for_the_slice() -> None:
    """After tensorize, warp-specialize and wgmma, the consumer releases the stage before its epilogue reads
    the global slice; staging the slice moves the release after that read. On kmeans-assign (registers
    fold) and knn (shared fold, topk.update) the result passes the verifier and the oracle."""
    for problem, item in (("kmeans-assign", "BN=128"), ("knn", "BN=64")):
        naive = _load(PROBLEMS / problem.replace("-", "_") / "schedules" / "naive.cake")
        before = _walk(naive, ("tensorize", item), ("warp-specialize", ""), ("wgmma", ""))
        apps = _tactic().applications(before, _target())
        assert len(apps) == 1, (problem, [a.key for a in apps])
        text = _passes(problem, _tactic().apply(before, _target(), apps[0]))
        lines = text.splitlines()
        pipe = next(x.split()[1].rstrip(":") for x in lines if x.strip().startswith("pipe ") and "_s" in x)
        update = next(i for i, x in enumerate(lines) if "limit=" in x and "_s[s]" in x)
        releases = [i for i, x in enumerate(lines) if x.strip() == f"pipe.release {pipe}[s]"]
        assert releases and all(i > update for i in releases), (problem, pipe)
