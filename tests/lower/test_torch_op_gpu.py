"""``cake export --torch`` on a GPU: the operator module builds its kernels with nvcc and, in a process where
Cake cannot be imported, answers kmeans-assign and knn at a ragged cell as their oracles require, through
``torch.ops.cake`` eagerly and under ``torch.compile`` (its fake implementation), and refuses a wrong shape
with the ValueError that names the argument."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cake_core import plugins
from cake_core.cli import main

NVCC = shutil.which("nvcc")
TORCH = importlib.util.find_spec("torch") is not None

CHILD = textwrap.dedent(
    """
    import importlib, json, sys
    import numpy as np
    sys.modules["cake_core"] = None  # the operator must not need Cake
    import torch

    folder, op, data, dtype = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    names, ints = sys.argv[5].split(","), [int(v) for v in sys.argv[6].split(",") if v]
    sys.path.insert(0, folder)
    mod = importlib.import_module(op + "_op")
    mod.POISON_OUTPUTS = True  # every output element starts as -1: one the kernel misses fails the oracle
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]

    def device(a):
        return torch.from_numpy(a.view(np.int16)).view(tdtype).cuda() if dtype == "bf16" else torch.from_numpy(a).cuda()

    args = [device(np.load(f"{data}/{n}.npy")) for n in names]
    fn = getattr(torch.ops.cake, op)
    out = fn(*args, *ints)
    torch.cuda.synchronize()
    np.save(f"{data}/out.npy", out.cpu().numpy())
    compiled = torch.compile(lambda *a: fn(*a, *ints), backend="aot_eager", fullgraph=True)
    again = compiled(*args)
    torch.cuda.synchronize()
    refused = {}
    for label, bad in (("shape", [a[..., :64].contiguous() if i == 1 else a for i, a in enumerate(args)]),
                       ("contiguity", [a.transpose(0, 1) if i == 0 else a for i, a in enumerate(args)])):
        try:
            fn(*bad, *ints)
            refused[label] = None
        except ValueError as exc:
            refused[label] = str(exc)
    print(json.dumps({"compiled_equal": bool(torch.equal(again, out)), "refused": refused}))
    """
)


def _skip_without_gpu() -> None:
    from cake_core.runtime.device import driver_status

    if not TORCH:
        pytest.skip("torch is not installed")
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    ok, reason = driver_status()
    if not ok:
        pytest.skip(f"no NVIDIA driver here: {reason}")


CASES = pytest.mark.parametrize(("problem", "shape", "spec"), [
    ("kmeans-assign", {"B": 3, "N": 2011, "K": 300, "D": 128}, "T=bf16,D=128"),
    ("knn", {"B": 2, "M": 37, "N": 3001, "D": 128, "K": 10}, "T=bf16,D=128,K=10"),
])  # fmt: skip


@pytest.mark.gpu
@CASES
def test_torch_operator_answers_on_the_gpu_without_cake(problem: str, shape: dict[str, int], spec: str,
                                                        tmp_path: Path, record) -> None:  # fmt: skip
    _skip_without_gpu()
    folder = tmp_path / "ops"
    assert main(["export", problem, "--target", "h200", "--shape", spec, "--torch", str(folder)]) == 0
    op = problem.replace("-", "_")
    cache = tmp_path / "cache"
    env = {**os.environ, "CAKE_TORCH_CACHE": str(cache)}
    if problem == "kmeans-assign":  # prebuilt beside the module: the operator must load it, not build again
        r = subprocess.run([sys.executable, str(folder / f"{op}_op.py")], capture_output=True, text=True, env=env,
                           timeout=600)  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
    p = plugins.registry().get("problems", problem)
    inputs = p.make_inputs(shape, "bf16", 11)
    data = tmp_path / "data"
    data.mkdir()
    names = [t.name for t in p.tensors if t.role == "input"]
    for name in names:
        np.save(data / f"{name}.npy", inputs[name])
    ints = str(shape["K"]) if problem == "knn" else ""  # knn's K is an int argument
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    r = subprocess.run([sys.executable, str(child), str(folder), op, str(data), "bf16", ",".join(names), ints],
                       capture_output=True, text=True, env=env, timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    built = sorted(x.name for x in cache.glob("*.so")) if cache.exists() else []
    assert built == ([] if problem == "kmeans-assign" else [f"lib{op}-{_sha(folder, op)[:16]}.so"])
    report = p.check(inputs, {"out": np.load(data / "out.npy")}, shape, "bf16")
    record("torch-op", {"impl": f"torch-op:{problem}", "shape": shape, "dtype": "bf16", "correct": report.passed,
                        "oracle": report.summary(), "compiled_equal": seen["compiled_equal"]})  # fmt: skip
    assert report.passed, report.summary()
    assert seen["compiled_equal"]
    second = names[1]
    assert seen["refused"]["shape"] and f"`{second}` has D=64 (dimension 2)" in seen["refused"]["shape"]
    assert seen["refused"]["contiguity"] and f"`{names[0]}` is not contiguous" in seen["refused"]["contiguity"]


def _sha(folder: Path, op: str) -> str:
    return hashlib.sha256((folder / f"{op}.cu").read_bytes()).hexdigest()
