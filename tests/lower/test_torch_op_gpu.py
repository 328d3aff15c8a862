"""``cake export --torch`` on a GPU: the operator module builds its kernels with nvcc and, in a process where
Cake cannot be imported, answers every problem (kmeans-assign, knn, knn-ip, kmeans-update, kmeans-iter) at a
ragged cell as its oracle requires, through ``torch.ops.cake`` eagerly and under ``torch.compile`` (its fake
implementation), and refuses a wrong shape with the ValueError that names the argument."""

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

    def device(a):  # bf16 arrives as its uint16 bits; int32 inputs (kmeans-update's assign) as they are
        if a.dtype == np.uint16 and dtype == "bf16":
            return torch.from_numpy(a.view(np.int16)).view(tdtype).cuda()
        return torch.from_numpy(a).cuda()

    args = [device(np.load(f"{data}/{n}.npy")) for n in names]
    fn = getattr(torch.ops.cake, op)

    def save(out, tag):
        for i, t in enumerate(out if isinstance(out, tuple) else (out,)):
            t = t.cpu()
            np.save(f"{data}/{tag}{i}.npy", (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy())

    save(fn(*args, *ints), "out")
    torch.cuda.synchronize()
    compiled = torch.compile(lambda *a: fn(*a, *ints), backend="aot_eager", fullgraph=True)
    save(compiled(*args), "compiled")  # judged by the oracle too: sums by atomics need not be bitwise equal
    torch.cuda.synchronize()
    last3 = max(i for i, a in enumerate(args) if a.dim() == 3)  # the last input with a D dimension
    refused = {}
    for label, bad in (("shape", [a[..., :64].contiguous() if i == last3 else a for i, a in enumerate(args)]),
                       ("contiguity", [a.transpose(0, 1) if i == 0 else a for i, a in enumerate(args)])):
        try:
            fn(*bad, *ints)
            refused[label] = None
        except ValueError as exc:
            refused[label] = str(exc)
    print(json.dumps({"refused": refused}))
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
    ("knn-ip", {"B": 2, "M": 37, "N": 3001, "D": 128, "K": 10}, "T=bf16,D=128,K=10"),
    ("kmeans-update", {"B": 2, "N": 3001, "K": 300, "D": 128}, "T=bf16,D=128"),
    ("kmeans-iter", {"B": 2, "N": 3001, "K": 300, "D": 128}, "T=bf16,D=128"),
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
    ints = str(shape["K"]) if problem in ("knn", "knn-ip") else ""  # knn's K is an int argument
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    r = subprocess.run([sys.executable, str(child), str(folder), op, str(data), "bf16", ",".join(names), ints],
                       capture_output=True, text=True, env=env, timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    built = sorted(x.name for x in cache.glob("*.so")) if cache.exists() else []
    assert built == ([] if problem == "kmeans-assign" else [f"lib{op}-{_sha(folder, op)[:16]}.so"])
    outputs = [t for t in p.tensors if t.role == "output"]  # the operator returns them in this order
    for tag in ("out", "compiled"):
        got = {t.name: _host(np.load(data / f"{tag}{i}.npy"), inputs[names[0]]) for i, t in enumerate(outputs)}
        report = p.check(inputs, got, shape, "bf16")
        record("torch-op", {"impl": f"torch-op:{problem}", "run": tag, "shape": shape, "dtype": "bf16",
                            "correct": report.passed, "oracle": report.summary()})  # fmt: skip
        assert report.passed, (tag, report.summary())
    third = [n for n in names if inputs[n].ndim == 3][-1]
    assert seen["refused"]["shape"] and f"`{third}` has D=64 (dimension 2)" in seen["refused"]["shape"]
    assert seen["refused"]["contiguity"] and f"`{names[0]}` is not contiguous" in seen["refused"]["contiguity"]


def _host(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    """An output as the problem's host arrays hold it: bf16 came back as its int16 bits."""
    return a.view(like.dtype) if a.dtype == np.int16 and like.dtype.itemsize == 2 else a


def _sha(folder: Path, op: str) -> str:
    return hashlib.sha256((folder / f"{op}.cu").read_bytes()).hexdigest()
