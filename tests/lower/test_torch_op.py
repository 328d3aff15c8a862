"""``cake export --torch``: the written operator module compiles, needs no Cake, and its argument checks
(the code the operator runs, imported here where torch is absent) raise one clear ValueError each."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import py_compile
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from cake_core.cli import main
from cake_core.lower.torch_op import BEST

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = ROOT / "cake_core" / "problems" / "kmeans_assign" / "schedules"


def _export(out: Path, *args: str) -> Path:
    assert main(["export", *args, "--target", "h200", "--shape", "T=bf16,D=128", "--torch", str(out)]) == 0
    return out


def _import(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The module as a user without Cake (and here without torch) imports it."""
    monkeypatch.setitem(sys.modules, "cake_core", None)  # any import of Cake fails
    monkeypatch.setitem(sys.modules, "torch", None)  # torch absent, even where it is installed
    spec = importlib.util.spec_from_file_location(f"_op_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("torch")
    return {name: _export(base / name, name) for name in ("kmeans-assign", "knn", "kmeans-update", "kmeans-iter")}


@pytest.fixture
def ka(exported: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return _import(exported["kmeans-assign"] / "kmeans_assign_op.py", monkeypatch)


@pytest.fixture
def knn(exported: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return _import(exported["knn"] / "knn_op.py", monkeypatch)


def _t(shape: tuple[int, ...], dtype: str = "bfloat16", device: str = "cuda:0", contiguous: bool = True) -> tuple:
    return (shape, dtype, device, device.split(":")[0], contiguous)


def test_module_compiles_names_the_best_schedule_and_imports_nothing_of_cake(exported: dict[str, Path]) -> None:
    for name, folder in exported.items():
        op = name.replace("-", "_")
        module = folder / f"{op}_op.py"
        py_compile.compile(str(module), doraise=True)
        tree = ast.parse(module.read_text())
        imported = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}  # fmt: skip
        assert "cake_core" not in imported and "torch" in imported
        text = module.read_text()
        assert f'custom_op("cake::{op}"' in text and f"@{op}.register_fake" in text
        assert f"SCHEDULE = {Path(BEST[name]['h200'].schedule).name!r}" in text
        # the module's source hash is the hash of the .cu beside it, and the launchers it names are the header's
        cu = folder / f"{op}.cu"
        assert f"SOURCE_SHA256 = '{hashlib.sha256(cu.read_bytes()).hexdigest()}'" in text
        header = (folder / f"{op}.h").read_text()
        for launcher in ast.literal_eval(text.split("\nSPECS = ")[1].split("\n")[0]).values():
            assert all(f"{fn}(" in header for fn in launcher)


@pytest.mark.parametrize("problem", sorted(BEST))
def test_each_best_schedule_is_the_fastest_correct_one_its_records_measured(problem: str) -> None:
    for target, best in BEST[problem].items():
        data = json.loads((ROOT / "bench" / "results" / best.records).read_text())
        records = [r for run in data.values() for r in run] if isinstance(data, dict) else data
        lowest: dict[tuple[str, str], float] = {}
        for r in records:
            ours = r.get("problem") == problem and r["impl"].startswith("cake:")
            if ours and r.get("correct") and r.get("median_ms"):
                cell = (json.dumps(r["shape"], sort_keys=True), r["dtype"])
                lowest[(r["impl"], *cell)] = min(lowest.get((r["impl"], *cell), 1e9), r["median_ms"])
        chosen = "cake:" + Path(best.schedule).stem
        cells = {k[1:] for k in lowest if k[0] == chosen}
        assert cells, f"{best.records} has no correct {chosen} record of {problem}"
        for cell in cells:
            rivals = {k[0]: v for k, v in lowest.items() if k[1:] == cell}
            assert min(rivals, key=rivals.__getitem__) == chosen, (target, cell, rivals)
        assert (ROOT / "cake_core" / "problems" / best.schedule).exists()


def test_knn_takes_k_as_an_int_and_reads_the_split_schedule(knn: ModuleType) -> None:
    assert knn.SCHEDULE == "hopper_split.cake" and knn.SIZE_ARGS == ("K",) and knn.torch is None
    sizes, key = knn.check_arguments({"q": _t((2, 37, 128)), "x": _t((2, 1001, 128))}, {"K": 10})
    assert sizes == {"B": 2, "M": 37, "D": 128, "N": 1001, "K": 10} and key == ("bfloat16", 128, 10)
    assert knn.output_shapes(sizes, key) == [("out", (2, 37, 10), "int32")]
    assert knn.SPECS[key][0] == "cake_knn__T_bf16__D_128__K_10"


def test_kmeans_assign_accepts_a_ragged_cell(ka: ModuleType) -> None:
    sizes, key = ka.check_arguments({"x": _t((3, 20011, 128)), "c": _t((3, 1000, 128))}, {})
    assert key == ("bfloat16", 128) and ka.output_shapes(sizes, key) == [("out", (3, 20011), "int32")]


@pytest.mark.parametrize(("x", "c", "says"), [
    (_t((3, 50, 128), device="cpu"), _t((3, 10, 128)), r"`x` is on cpu; cake::kmeans_assign runs on a CUDA device"),
    (_t((3, 50, 128)), _t((3, 10, 128), device="cuda:1"), r"`c` is on cuda:1 but `x` is on cuda:0"),
    (_t((3, 50, 128), "float32"), _t((3, 10, 128)), r"`x` is float32; cake::kmeans_assign takes bfloat16 there"),
    (_t((3, 50, 128), "float16"), _t((3, 10, 128)), r"`x` is float16; .* takes bfloat16"),  # not exported
    (_t((3, 50, 128)), _t((10, 128)), r"`c` has 2 dimensions, not 3 \(\[B, K, D\]\)"),
    (_t((3, 50, 128), contiguous=False), _t((3, 10, 128)), r"`x` is not contiguous: pass `x.contiguous\(\)`"),
    (_t((3, 50, 128)), _t((2, 10, 128)), r"`c` has B=2 \(dimension 0\) but `x` has B=3"),
    (_t((3, 50, 128)), _t((3, 10, 64)), r"`c` has D=64 \(dimension 2\) but `x` has D=128"),
    (_t((3, 50, 96)), _t((3, 10, 96)), r"`x` has D=96; cake::kmeans_assign needs D in \{64, 128, 256\}"),
    (_t((3, 50, 64)), _t((3, 10, 64)), r"`x` has D=64, which was not exported \(exported: 128\)"),
    (_t((3, 0, 128)), _t((3, 10, 128)), r"`x` has N=0; cake::kmeans_assign needs N >= 1"),
])  # fmt: skip
def test_kmeans_assign_refuses_bad_arguments_naming_them(ka: ModuleType, x: tuple, c: tuple, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ka.check_arguments({"x": x, "c": c}, {})


@pytest.mark.parametrize(("n", "k", "says"), [
    (8, 10, r"`K` has K=10; cake::knn needs K <= N=8"),
    (100, 32, r"`K` has K=32, which was not exported \(exported: 1, 2, 4, 8, 10, 16\)"),
    (100, 3, r"`K` has K=3; cake::knn needs K in \{1, 2, 4, 8, 10, 16, 32, 64, 100, 128\}"),
    (100, True, r"`K` must be an int, not bool"),
])  # fmt: skip
def test_knn_refuses_a_k_it_cannot_answer(knn: ModuleType, n: int, k: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        knn.check_arguments({"q": _t((1, 5, 128)), "x": _t((1, n, 128))}, {"K": k})


def test_kmeans_update_checks_the_domain_and_the_assignments(
    exported: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _import(exported["kmeans-update"] / "kmeans_update_op.py", monkeypatch)
    args = {"x": _t((2, 300, 96)), "assign": _t((2, 300), "int32"), "c": _t((2, 1024, 96))}
    with pytest.raises(ValueError, match=r"`x` has D=96; cake::kmeans_update needs D in \{64, 128, 256\}"):
        mod.check_arguments(args, {})
    args["x"], args["c"] = _t((2, 300, 128)), _t((2, 1024, 128))
    args["assign"] = _t((2, 300), "bfloat16")
    with pytest.raises(ValueError, match=r"`assign` is bfloat16; cake::kmeans_update takes int32 there"):
        mod.check_arguments(args, {})
    args["assign"] = _t((2, 300), "int32")
    sizes, key = mod.check_arguments(args, {})
    assert mod.output_shapes(sizes, key) == [("centroids", (2, 1024, 128), "float32"), ("counts", (2, 1024), "int32")]
    mod.check_values("assign", 0, 1023, sizes)
    with pytest.raises(ValueError, match=r"`assign` holds -1..5; .* needs values in \[0, K\) = \[0, 1024\)"):
        mod.check_values("assign", -1, 5, sizes)


def test_kmeans_iter_returns_centroids_in_the_inputs_element_type(
    exported: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _import(exported["kmeans-iter"] / "kmeans_iter_op.py", monkeypatch)
    assert "-> typing.Tuple[torch.Tensor, torch.Tensor]" in (exported["kmeans-iter"] / "kmeans_iter_op.py").read_text()
    sizes, key = mod.check_arguments({"x": _t((2, 300, 128)), "c": _t((2, 17, 128))}, {})
    assert mod.output_shapes(sizes, key) == [("assign", (2, 300), "int32"), ("centroids", (2, 17, 128), "bfloat16")]


def test_a_changed_source_is_refused_and_a_missing_nvcc_is_named(
    exported: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(exported["kmeans-assign"], folder)
    mod = _import(folder / "kmeans_assign_op.py", monkeypatch)
    monkeypatch.setenv("CAKE_TORCH_CACHE", str(tmp_path / "cache"))
    if shutil.which("nvcc") is None:
        monkeypatch.delenv("CUDA_HOME", raising=False)
        monkeypatch.delenv("CUDA_PATH", raising=False)
        with pytest.raises(RuntimeError, match=r"needs nvcc to build kmeans_assign.cu"):
            mod.build()
    with open(folder / "kmeans_assign.cu", "a") as f:
        f.write("// edited\n")
    with pytest.raises(RuntimeError, match=r"kmeans_assign.cu changed after it was exported: export again"):
        mod.build()


def test_a_committed_file_exports_as_its_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _export(tmp_path / "o", str(SCHEDULES / "hopper_overlap.cake"))
    mod = _import(out / "kmeans_assign_op.py", monkeypatch)
    assert mod.SCHEDULE == "hopper_overlap.cake" and mod.PROBLEM == "kmeans-assign"


@pytest.mark.parametrize(("argv", "says"), [
    (["no-such-problem"], "`no-such-problem` is neither a file nor a problem (problems: kmeans-assign, "),
    (["kmeans-assign", "--target", "a100"], "no schedule of `kmeans-assign` has been measured on `a100`"),
    (["kmeans-assign", "-o", "X"], "give --torch DIR or -o DIR, not both"),
    (["kmeans-assign", "--problem", "knn"], "--problem knn contradicts the problem `kmeans-assign`"),
    ([str(ROOT / "tests" / "lower" / "ws_ldmatrix.cake")], "not a committed schedule of any problem"),
    (["kmeans-assign", "--shape", "Q=3"], "`Q` is not a specialization constant"),
    ([str(SCHEDULES / "hopper.cake"), "--problem", "knn"],
     "`kmeans_assign` takes `c`, which problem `knn` does not name"),
])  # fmt: skip
def test_bad_export_requests_are_one_line(argv: list[str], says: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    target = [] if "--target" in argv else ["--target", "h200"]
    assert main(["export", *argv, *target, "--torch", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_problem_without_torch_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(SCHEDULES / "hopper.cake"), "--target", "h200", "--problem", "kmeans-assign"]) == 2
    assert "--problem names the contract of a --torch operator" in capsys.readouterr().err
