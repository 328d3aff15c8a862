"""What the benchmark scripts of this folder share: where the kernels they read live, the registry the
corpus is verified with, the commit a record names, and the GPU side of the side-by-side benchmarks
(a Cake program launched on torch's stream, the timing loop with its L2 flush, records written as they
come).

The scripts run as ``python bench/NAME.py``, so this folder is on their import path. torch and the CUDA
driver are imported inside the functions that need them: a script parses its arguments without either.
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


#: torch's dtype of each Cake element type a benchmark passes
TORCH_DTYPES = {"f32": "float32", "i32": "int32", "bf16": "bfloat16", "f16": "float16"}


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, TORCH_DTYPES[name])


#: SASS findings by cubin digest: one disassembly per cubin however many cells share it
_SASS: dict[str, Any] = {}


class CakeLauncher:
    """A Cake program of ``problem`` lowered for ``target`` at one cell, launched on torch's current stream
    over torch tensors (``tensors`` by parameter name; the program's buffers are allocated here)."""

    def __init__(self, path: Path, target: Any, problem: Any, shape: dict, dtype: str, tensors: dict) -> None:
        import torch
        from cuda.bindings import driver as cu

        from cake_core import pipeline
        from cake_core.loop.benchmark import program_values
        from cake_core.lower.program import build_plan, program_sizes
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
        for t in plan.tensors:
            if t.name not in self.tensors:  # scratch: program buffers
                self.tensors[t.name] = torch.empty(t.shape, dtype=torch_dtype(t.dtype), device="cuda")
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

    def evidence(self) -> dict[str, Any]:
        """What a record keeps of the compiled program: the SASS claims found (a second of cuobjdump, once
        per cubin), registers, spills, warnings."""
        import hashlib

        from cake_core.runtime.sass import check_claims

        key = hashlib.sha256(self.compiled.cubin).hexdigest()
        if key not in _SASS:
            _SASS[key] = check_claims(self.compiled.cubin, self.candidate.sass_claims())
        f = _SASS[key]
        return {
            "sass": {"claims": list(f.claims), "present": list(f.present), "missing": list(f.missing),
                     "counts": f.counts},
            "resources": {k: {"registers": r.registers, "spill_stores": r.spill_stores,
                              "spill_loads": r.spill_loads, "stack": r.stack_frame}
                          for k, r in self.compiled.kernels.items()},
            "warnings": [str(w) for w in self.compiled.warnings],
        }  # fmt: skip


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


def time_fn(fn: Any, reps: int, warmup: int, flush: Any) -> list[float]:
    """Milliseconds of ``reps`` calls of ``fn`` after ``warmup`` ones, CUDA events around each, the L2
    flushed (``flush.zero_()``, a buffer larger than the L2) before each, outside the timed region."""
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
    """The records so far, replacing the file whole (written beside it, then renamed): a run cut short by a
    time limit keeps what it measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(records, indent=1))
    tmp.replace(path)
