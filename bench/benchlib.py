"""What the benchmark scripts of this folder share: where the kernels they read live, the registry the
corpus is verified with, the commit a record names, and for the side-by-side GPU benchmarks a launcher of
lowered Cake programs on torch's stream, the timing loop and the writing of records.

The scripts run as ``python bench/NAME.py``, so this folder is on their import path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from collections.abc import Iterable
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


class CakeLauncher:
    """Launch a lowered Cake program on torch's current stream, over torch tensors; a cell outside the
    program's domain raises :class:`~cake_core.errors.CakeUserError` before anything is compiled."""

    def __init__(self, path: Path, problem, target, shape: dict, dtype: str, tensors: dict) -> None:
        import torch
        from cuda.bindings import driver as cu

        from cake_core import pipeline
        from cake_core.lower.program import build_plan, program_sizes
        from cake_core.loop.benchmark import program_values
        from cake_core.runtime.executor import encode_tensor_map, pack_params
        from cake_core.runtime.plan import TensorMapArg

        self.candidate = cand = pipeline.Candidate.load(path, target)
        values = program_values(cand.check(), problem, shape, dtype)
        program_sizes(cand.check(), values)  # a cell outside the program's domain: CakeUserError, before compiling
        spec = cand.spec(values)
        self.compiled = compiled = cand.compile(spec)
        self.plan = plan = build_plan(cand.build(spec), compiled.cubin, values)
        self.cu = cu
        torch.cuda.synchronize()
        (err,) = cu.cuInit(0)
        assert int(err) == 0, err
        err, self.module = cu.cuModuleLoadData(compiled.cubin)
        assert int(err) == 0, err
        self.tensors = dict(tensors)
        for spec in plan.tensors:
            if spec.name not in self.tensors:  # scratch: program buffers
                tdt = {"f32": torch.float32, "i32": torch.int32, "bf16": torch.bfloat16, "f16": torch.float16}[spec.dtype]
                self.tensors[spec.name] = torch.empty(spec.shape, dtype=tdt, device="cuda")
        pointers = {name: t.data_ptr() for name, t in self.tensors.items()}
        self.launches = []
        for launch in plan.launches:
            err, fn = cu.cuModuleGetFunction(self.module, launch.function.encode())
            assert int(err) == 0, err
            if launch.smem_bytes > 48 * 1024:
                (err,) = cu.cuFuncSetAttribute(
                    fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.smem_bytes
                )
                assert int(err) == 0, err
            maps = {a: encode_tensor_map(cu, a, pointers[a.name]) for a in launch.args if isinstance(a, TensorMapArg)}
            self.launches.append((fn, launch, pack_params(launch, pointers, maps)))

    def __call__(self) -> None:
        import torch

        stream = self.cu.CUstream(torch.cuda.current_stream().cuda_stream)
        for fn, launch, params in self.launches:
            (err,) = self.cu.cuLaunchKernel(fn, *launch.grid, *launch.block, launch.smem_bytes, stream,
                                            params.address, 0)  # fmt: skip
            if int(err) != 0:
                raise RuntimeError(f"cuLaunchKernel({launch.function}): {err}")


def _compile_one(path: str, problem_name: str, shape: dict, dtype: str) -> str:
    """Compile one specialization into the disk cache (in a worker process); what it did, in a few words."""
    from cake_core import pipeline, plugins
    from cake_core.loop.benchmark import program_values

    reg = plugins.registry()
    cand = pipeline.Candidate.load(Path(path), reg.get("targets", "h200"))
    values = program_values(cand.check(), reg.get("problems", problem_name), shape, dtype)
    cand.compile(cand.spec(values))
    return f"{Path(path).stem} {dtype} {shape}"


def precompile(paths: Iterable[Path], problem: Any, cells: Iterable[tuple[dict, str]], workers: int) -> list[str]:
    """Compile, for h200, every specialization the schedules ``paths`` need at ``cells`` (those inside their
    domains), each once, ``workers`` at a time in spawned processes (NVRTC takes seconds to a minute per
    specialization of an unrolled kernel): :class:`CakeLauncher` then finds them in the disk cache. CUDA is
    never initialised in the workers. Returns one line per compile."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from cake_core import pipeline, plugins
    from cake_core.errors import CakeUserError
    from cake_core.loop.benchmark import program_values
    from cake_core.lower.program import program_sizes

    target = plugins.registry().get("targets", "h200")
    jobs, seen = [], set()
    for path in paths:
        cand = pipeline.Candidate.load(path, target)
        for shape, dtype in cells:
            values = program_values(cand.check(), problem, shape, dtype)
            try:
                program_sizes(cand.check(), values)
            except CakeUserError:
                continue  # outside the domain: recorded as unsupported later
            key = (str(path), cand.spec(values))
            if key not in seen:
                seen.add(key)
                jobs.append((str(path), problem.name, dict(shape), dtype))
    if not jobs:
        return []
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(jobs))), mp_context=get_context("spawn")) as ex:
        return list(ex.map(_compile_one, *zip(*jobs, strict=True)))


def time_fn(fn, reps: int, warmup: int, flush) -> list[float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        flush.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def write_records(path: Path, records: list[dict]) -> None:
    """The records so far, replacing the file whole (written beside it, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(records, indent=1))
    tmp.replace(path)


def to_device(host: dict, dtype: str) -> dict:
    """The problem's host arrays (bf16 as uint16 bit patterns) as CUDA tensors (bf16 as torch.bfloat16)."""
    import numpy as np
    import torch

    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    out = {}
    for name, v in host.items():
        t = torch.from_numpy(v.view(np.int16) if v.dtype == np.uint16 else v).cuda()
        out[name] = t.view(tdtype) if t.dtype == torch.int16 else t
    return out


#: SASS findings by cubin digest
_SASS: dict[str, Any] = {}


def cake_details(launcher: CakeLauncher) -> dict:
    """What a record of a Cake schedule adds: its SASS claims (a second of cuobjdump, once per cubin however
    many cells and runs share it), registers and spills per kernel, warnings."""
    import hashlib

    from cake_core.runtime.sass import check_claims

    key = hashlib.sha256(launcher.compiled.cubin).hexdigest()
    if key not in _SASS:
        _SASS[key] = check_claims(launcher.compiled.cubin, launcher.candidate.sass_claims())
    f = _SASS[key]
    return {
        "sass": {"claims": list(f.claims), "present": list(f.present), "missing": list(f.missing), "counts": f.counts},
        "resources": {k: {"registers": r.registers, "spill_stores": r.spill_stores, "spill_loads": r.spill_loads,
                          "stack": r.stack_frame} for k, r in launcher.compiled.kernels.items()},
        "warnings": [str(w) for w in launcher.compiled.warnings],
    }  # fmt: skip


def to_host(t: Any) -> Any:
    """A CUDA tensor as the problem's host array (bf16 as uint16 bit patterns)."""
    import numpy as np
    import torch

    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).cpu().numpy().view(np.uint16)
    return t.cpu().numpy()


def make_record(problem: Any, cell: Any, impl: str, run: int, samples: list[float], report: Any, *, gpu: str,
                target: str, commit: str, status: str = "ok", error: str | None = None,
                launcher: CakeLauncher | None = None) -> dict:  # fmt: skip
    """One record of a side-by-side benchmark at ``cell`` (a problem Cell): what every GPU result under
    bench/results carries, the oracle's verdict (None where nothing ran), TFLOP/s, and for a Cake schedule
    (``launcher``) its SASS claims and resources (``target`` is recorded for Cake schedules only)."""
    import statistics

    from cake_core.loop.benchmark import today

    med = statistics.median(samples) if samples else None
    rec = {
        "problem": problem.name, "shape": dict(cell.shape), "dtype": cell.dtype, "gpu": gpu,
        "target": target if launcher is not None else None, "date": today(), "commit": commit, "impl": impl,
        "run": run, "median_ms": med, "samples": samples, "correct": report.passed if report else None,
        "oracle": report.summary() if report else None, "status": status, "error": error,
        "tflops": problem.flops(cell.shape) / (med * 1e-3) / 1e12 if med else None,
    }  # fmt: skip
    if launcher is not None:
        rec.update(cake_details(launcher))
    return rec


def keep(records: list[dict], rec: dict, label: str, out: str) -> None:
    """Add ``rec`` to ``records``, say it in one line, and rewrite ``out`` (when given) with every record so
    far: a run cut short by a time limit keeps what it measured."""
    records.append(rec)
    med = rec["median_ms"]
    print(f"run {rec['run']} {label} {rec['impl']:26} {med if med else float('nan'):8.3f} ms  {rec['status']} "
          f"correct={rec['correct']}", flush=True)  # fmt: skip
    if out:
        write_records(Path(out), records)
