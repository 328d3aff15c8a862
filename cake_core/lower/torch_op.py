"""PyTorch operators from exported kernels: ``cake export ... --torch DIR`` writes ``DIR/<op>_op.py``.

The written module needs no Cake at run time. It holds the problem's contract as plain data (its tensors,
sizes, domain, the exported specializations and their launcher symbols) and a fixed runtime: at first use
it loads ``lib<op>-<hash>.so`` found beside it, or builds the exported ``.cu`` with nvcc into a cache
keyed by the source's SHA-256; it checks every argument's device, dtype, rank, contiguity and sizes
(``ValueError``, one sentence naming the argument); it allocates the outputs and the workspace and
launches on ``torch.cuda.current_stream()``. It registers ``torch.library.custom_op("cake::<op>")`` with
a fake implementation, so ``torch.compile`` traces through it. Without torch the module still imports,
registering nothing: its checks stay usable (and testable) where torch is absent.

Which schedule a problem name exports: no problem names a best schedule, so :data:`BEST` does, per
target, from the measured records it cites (``bench/results``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import attrs

from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.lower.program import LoweredProgram

_PROBLEMS = Path(__file__).resolve().parents[1] / "problems"


@attrs.frozen
class Best:
    """The schedule exported for a problem name: its file under cake_core/problems, the measured records
    that chose it (a file under bench/results) and what they say."""

    schedule: str
    records: str
    basis: str


#: problem -> target -> its best schedule; tests/lower/test_torch_op.py checks each against its records
BEST: dict[str, dict[str, Best]] = {
    "kmeans-assign": {"h200": Best("kmeans_assign/schedules/hopper.cake", "2026-12-02-h200-cluster.json",
                                   "1.089-1.094 ms against hopper_cluster's 1.114-1.118 at B=32 N=65536 K=1024 "
                                   "D=128 bf16")},
    "knn": {"h200": Best("knn/schedules/hopper_split.cake", "2026-12-02-h200-knn-4.json",
                         "3.22-3.24 ms at B=1 M=4096 N=1048576 D=128 K=10 f16 (torch fp32: 92.5 ms in the same "
                         "runs); K up to 16 (hopper_split_big.cake takes K in {64, 100, 128})")},
    "knn-ip": {"h200": Best("knn/ip/schedules/hopper_split.cake", "2026-12-02-h200-knn-4.json",
                            "3.15 ms at B=1 M=4096 N=1048576 D=128 K=10 f16 (torch fp32: 77.1 ms in the same "
                            "runs)")},
    "kmeans-update": {"h200": Best("kmeans_update/schedules/vector.cake", "2026-12-02-h200-kmeans-update-2.json",
                                   "0.814-0.819 ms against staged's 1.684-1.693 at B=32 N=65536 K=1024 D=128 "
                                   "bf16 and f16")},
    "kmeans-iter": {"h200": Best("kmeans_iter/schedules/hopper.cake", "2026-12-02-h200-kmeans-iter-2.json",
                                 "1.74 ms against fused's 2.93-3.01 at B=32 N=65536 K=1024 D=128 bf16, faster at "
                                 "every measured cell")},
}  # fmt: skip

#: size relations a problem checks in code rather than in its size declarations (Knn._cell: K <= N)
_PROBLEM_RELATIONS: dict[str, tuple[tuple[str, str, int | str], ...]] = {
    "knn": (("K", "<=", "N"),),
    "knn-ip": (("K", "<=", "N"),),
}
#: index inputs a kernel follows into memory: (tensor, lowest, bound) with values in [lowest, bound)
_PROBLEM_VALUE_RANGES: dict[str, tuple[tuple[str, int, str], ...]] = {
    "kmeans-update": (("assign", 0, "K"),),
}
#: Cake element type -> torch dtype name (``str(torch.bfloat16)`` without ``torch.``)
TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "i32": "int32"}


def best_schedule(problem: str, target: str) -> tuple[Path, str]:
    """The schedule :data:`BEST` names for ``problem`` on ``target`` and why."""
    by_target = BEST.get(problem)
    if by_target is None:
        raise CakeUserError(f"no best schedule is named for problem `{problem}` (named: {', '.join(BEST)}); "
                            f"pass a .cake file with --problem")  # fmt: skip
    if target not in by_target:
        raise CakeUserError(f"no schedule of `{problem}` has been measured on `{target}` (measured on: "
                            f"{', '.join(by_target)}); pass a .cake file with --problem")  # fmt: skip
    best = by_target[target]
    return _PROBLEMS / best.schedule, f"{best.basis} (bench/results/{best.records})"


def op_name(problem: str) -> str:
    """``kmeans-assign`` -> ``kmeans_assign`` (the operator is ``cake::kmeans_assign``)."""
    return problem.replace("-", "_")


@attrs.frozen
class OpPlan:
    """What the written module knows, as plain data (reprs of these fields are its constants)."""

    op: str
    problem: str
    schedule: str
    target: str
    arch: str  # "90a"
    source: str  # the .cu file name beside the module
    source_sha256: str
    inputs: tuple[tuple[str, tuple[str, ...], str], ...]  # (name, size names, "T" or torch dtype)
    size_args: tuple[str, ...]  # sizes no input carries: int arguments of the operator
    outputs: tuple[tuple[str, tuple[str, ...], str], ...]
    params: tuple[str, ...]  # the launcher's pointer order
    runtime_sizes: tuple[str, ...]  # the launcher's int arguments, in order
    sizes: dict[str, tuple[int, tuple[int, ...]]]  # name -> (minimum, choices)
    relations: tuple[tuple[str, str, int | str], ...]  # (size, ">=" | "<=" | "%", int or size name)
    value_ranges: tuple[tuple[str, int, str], ...]  # (input, lowest, size name): values in [lowest, size)
    spec_keys: tuple[str, ...]
    specs: dict[tuple[int | str, ...], tuple[str, str]]  # values per spec_keys -> (launcher, workspace fn)


def _program_relations(prog: n.Program) -> list[tuple[str, str, int | str]]:
    out: list[tuple[str, str, int | str]] = []
    for c in prog.domain:
        if c.op == "in":
            continue  # a specialization constant: selected by SPECS
        if c.op not in (">=", "<=", "%") or len(c.values) != 1:
            raise CakeUserError(f"the operator cannot check the domain clause `{c.var} {c.op} ...` of "
                                f"`{prog.name}`")  # fmt: skip
        v = c.values[0]
        bound = v.id if isinstance(v, n.Name) else try_int(v, {})
        if bound is None:
            raise CakeUserError(f"the operator cannot check the domain clause of `{c.var}` of `{prog.name}`: "
                                "its bound is neither a number nor a size")  # fmt: skip
        out.append((c.var, c.op, bound))
    return out


def plan(problem, lowered: Sequence[LoweredProgram], functions: Sequence[str],  # type: ignore[no-untyped-def]
         workspace_functions: Sequence[str], runtime_sizes: Sequence[str], source: str, source_bytes: bytes,
         schedule: str) -> OpPlan:  # fmt: skip
    """The operator of ``problem`` over the exported specializations of one program."""
    prog = lowered[0].checked.module.entry
    target = lowered[0].target
    decls = {t.name: t for t in problem.tensors}
    params = tuple(p.name for p in prog.params)
    missing = [p for p in params if p not in decls]
    if missing:
        raise CakeUserError(f"`{prog.name}` takes `{missing[0]}`, which problem `{problem.name}` does not name "
                            f"(its tensors: {', '.join(decls)})")  # fmt: skip
    unfed = [t for t in decls if t not in params]
    if unfed:
        raise CakeUserError(f"`{prog.name}` does not take `{unfed[0]}` of problem `{problem.name}`")
    ptypes = {p.name: p.dtype for p in prog.params}

    def dtype_of(name: str) -> str:
        d = str(ptypes[name])
        return TORCH_DTYPES[d] if d in TORCH_DTYPES else d  # a type variable ("T") stays itself

    for t in problem.tensors:
        d = str(ptypes[t.name])
        if d not in TORCH_DTYPES and d != "T":
            raise CakeUserError(f"`{t.name}` of `{prog.name}` has element type `{d}`: the operator knows one type "
                                f"variable, `T`, and {', '.join(TORCH_DTYPES)}")  # fmt: skip
        given = [str(v) for lp in lowered for k, v in lp.spec.values if k == "T"] if d == "T" else [d]
        wrong = [g for g in given if g not in t.dtypes]
        if wrong:
            raise CakeUserError(f"`{prog.name}` gives `{t.name}` the element type `{wrong[0]}`, which problem "
                                f"`{problem.name}` does not allow there ({', '.join(t.dtypes)})")  # fmt: skip
    ins = tuple((t.name, tuple(t.shape), dtype_of(t.name)) for t in problem.tensors if t.role == "input")
    outs = tuple((t.name, tuple(t.shape), dtype_of(t.name)) for t in problem.tensors if t.role == "output")
    carried = {s for _, shape, _ in ins for s in shape}
    size_args = tuple(s.name for s in problem.sizes if s.name not in carried)
    spec_keys = tuple(k for k, _ in lowered[0].spec.values)
    specs: dict[tuple[int | str, ...], tuple[str, str]] = {}
    for lp, fn, ws in zip(lowered, functions, workspace_functions, strict=True):
        values = dict(lp.spec.values)
        key = tuple(TORCH_DTYPES.get(v, v) if isinstance(v, str) else v for v in (values[k] for k in spec_keys))
        specs[key] = (fn, ws)
    known = {s.name for s in problem.sizes}
    for k in spec_keys:
        if k not in known and not any(d == k for _, _, d in ins):
            raise CakeUserError(f"specialization constant `{k}` of `{prog.name}` is neither a size of problem "
                                f"`{problem.name}` nor an input's element type")  # fmt: skip
    relations = tuple(_program_relations(prog)) + _PROBLEM_RELATIONS.get(problem.name, ())
    for var, _, bound in relations:
        for s in (var, bound):
            if isinstance(s, str) and s not in known:
                raise CakeUserError(f"the domain of `{prog.name}` bounds `{s}`, which is not a size of problem "
                                    f"`{problem.name}`")  # fmt: skip
    return OpPlan(
        op=op_name(problem.name), problem=problem.name, schedule=schedule, target=target.name,
        arch=target.nvrtc_arch.removeprefix("sm_"), source=source,
        source_sha256=hashlib.sha256(source_bytes).hexdigest(), inputs=ins, size_args=size_args,
        outputs=outs, params=params, runtime_sizes=tuple(runtime_sizes),
        sizes={s.name: (int(s.minimum), tuple(int(c) for c in s.choices)) for s in problem.sizes},
        relations=relations, value_ranges=_PROBLEM_VALUE_RANGES.get(problem.name, ()), spec_keys=spec_keys,
        specs=specs,
    )  # fmt: skip


def select_specs(cand, values: dict[str, int | str]) -> list:  # type: ignore[no-untyped-def]
    """The candidate's specializations that agree with every value given (``T=bf16`` keeps all D and K)."""
    specs = cand.specs()
    if not values:
        return specs
    keys = {k for s in specs for k, _ in s.values}
    unknown = sorted(set(values) - keys)
    if unknown:
        raise CakeUserError(f"`{unknown[0]}` is not a specialization constant of {cand.path} "
                            f"(they are: {', '.join(sorted(keys)) or 'none'})")  # fmt: skip
    chosen = [s for s in specs if all(s.env.get(k) == v for k, v in values.items())]
    if not chosen:
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        raise CakeUserError(f"no specialization of {cand.path} has {shown}")
    return chosen


def render(p: OpPlan) -> str:
    """The module's text: a docstring, the plan as constants, the fixed runtime, the operator."""
    elems = "|".join(sorted({k[p.spec_keys.index("T")] for k in p.specs})) if "T" in p.spec_keys else "T"
    tensors = ", ".join(f"{name}: {elems if dt == 'T' else dt}[{', '.join(shape)}]" for name, shape, dt in p.inputs)
    ints = "".join(f", {s}: int" for s in p.size_args)
    outs = ", ".join(f"{name}: {elems if dt == 'T' else dt}[{', '.join(shape)}]" for name, shape, dt in p.outputs)
    exported = "; ".join(", ".join(f"{k}={v}" for k, v in zip(p.spec_keys, key, strict=True)) or "(single)"
                         for key in p.specs)  # fmt: skip
    head = (
        f'"""`torch.ops.cake.{p.op}`: problem `{p.problem}` by Cake\'s `{p.schedule}` for `{p.target}` '
        f"(sm_{p.arch}).\n\n"
        f"    torch.ops.cake.{p.op}({tensors}{ints}) -> {outs}\n\n"
        f"Exported specializations: {exported}.\n"
        f"Needs torch and, unless lib{p.op}-<hash>.so is beside this file, nvcc (CUDA 12) on PATH or in\n"
        f"CUDA_HOME at first use; it builds {p.source} into $CAKE_TORCH_CACHE (default ~/.cache/cake-torch).\n"
        f"`python {p.op}_op.py` builds the library beside this file. Generated by `cake export --torch`.\n"
        f'"""\n'
    )
    consts = "\n".join(f"{name.upper()} = {getattr(p, name)!r}" for name in (
        "op", "problem", "schedule", "target", "arch", "source", "source_sha256", "inputs", "size_args",
        "outputs", "params", "runtime_sizes", "sizes", "relations", "value_ranges", "spec_keys", "specs"))  # fmt: skip
    imports = _IMPORTS
    if len(p.outputs) > 1:  # the operator's return annotation is a typing.Tuple
        imports = imports.replace("import threading\n", "import threading\nimport typing\n")
    return head + imports + "\n" + consts + "\n" + _RUNTIME + _operator(p)


def _operator(p: OpPlan) -> str:
    names = [name for name, _, _ in p.inputs]
    args = ", ".join([f"{x}: torch.Tensor" for x in names] + [f"{s}: int" for s in p.size_args])
    schema_args = ", ".join([f"Tensor {x}" for x in names] + [f"int {s}" for s in p.size_args])
    if len(p.outputs) == 1:
        ret, schema_ret, wrap = "torch.Tensor", "Tensor", "{}[0]"
    else:
        ret = f"typing.Tuple[{', '.join('torch.Tensor' for _ in p.outputs)}]"
        schema_ret, wrap = f"({', '.join('Tensor' for _ in p.outputs)})", "tuple({})"  # _run returns a list
    call = f"({', '.join(names)},), ({', '.join(p.size_args)}{',' if p.size_args else ''})"
    return (
        "\n\nif torch is not None:\n\n"
        f'    @torch.library.custom_op("cake::{p.op}", mutates_args=(), schema="({schema_args}) -> {schema_ret}")\n'
        f"    def {p.op}({args}) -> {ret}:\n"
        f"        return {wrap.format(f'_run({call})')}\n\n"
        f"    @{p.op}.register_fake\n"
        f"    def _{p.op}_fake({args}) -> {ret}:\n"
        f"        return {wrap.format(f'_fake({call})')}\n\n\n"
        'if __name__ == "__main__":\n'
        "    print(build(beside=True))\n"
    )


_IMPORTS = '''
import ctypes
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

try:
    import torch
except ImportError:  # the checks below still work; the operator needs torch
    torch = None
'''

_RUNTIME = '''
#: set True to fill each output with a pattern no kernel writes before the launch (tests: a missed element shows)
POISON_OUTPUTS = False
_INT_MAX = 2**31 - 1
_LIB = None
_LOCK = threading.Lock()


def check_arguments(tensors, ints):
    """Check the operator's arguments; return (sizes, specialization key) or raise ValueError.

    ``tensors`` maps each input's name to (shape, dtype name, device text, device type, contiguous);
    ``ints`` maps each int argument's name to its value.
    """
    sizes, source = {}, {}
    device = elem = None
    for name, dims, want in INPUTS:
        shape, dtype, dev, dev_type, contiguous = tensors[name]
        if dev_type != "cuda":
            raise ValueError(f"`{name}` is on {dev}; cake::{OP} runs on a CUDA device")
        if device is None:
            device = (name, dev)
        elif dev != device[1]:
            raise ValueError(f"`{name}` is on {dev} but `{device[0]}` is on {device[1]}: put the inputs on one device")
        allowed = sorted({k[SPEC_KEYS.index("T")] for k in SPECS}) if want == "T" else [want]
        if dtype not in allowed:
            raise ValueError(f"`{name}` is {dtype}; cake::{OP} takes {' or '.join(allowed)} there")
        if want == "T":
            if elem is None:
                elem = (name, dtype)
            elif dtype != elem[1]:
                raise ValueError(f"`{name}` is {dtype} but `{elem[0]}` is {elem[1]}: the inputs share one element type")
        if len(shape) != len(dims):
            raise ValueError(f"`{name}` has {len(shape)} dimensions, not {len(dims)} ([{', '.join(dims)}])")
        if not contiguous:
            raise ValueError(f"`{name}` is not contiguous: pass `{name}.contiguous()`")
        for axis, (size, value) in enumerate(zip(dims, shape)):
            if size in sizes and sizes[size] != value:
                raise ValueError(f"`{name}` has {size}={value} (dimension {axis}) but `{source[size]}` has "
                                 f"{size}={sizes[size]}")
            sizes.setdefault(size, value)
            source.setdefault(size, name)
    for name in SIZE_ARGS:
        value = ints[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"`{name}` must be an int, not {type(value).__name__}")
        sizes[name], source[name] = value, name
    for size, (minimum, choices) in SIZES.items():
        value = sizes[size]
        if value < minimum:
            raise ValueError(f"`{source[size]}` has {size}={value}; cake::{OP} needs {size} >= {minimum}")
        if choices and value not in choices:
            raise ValueError(f"`{source[size]}` has {size}={value}; cake::{OP} needs {size} in "
                             f"{{{', '.join(map(str, choices))}}}")
        if value > _INT_MAX:
            raise ValueError(f"`{source[size]}` has {size}={value}, over the launcher's int range")
    for size, op, bound in RELATIONS:
        value, limit = sizes[size], sizes[bound] if isinstance(bound, str) else bound
        ok = value >= limit if op == ">=" else value <= limit if op == "<=" else value % limit == 0
        if not ok:
            said = f"{bound}={limit}" if isinstance(bound, str) else str(bound)
            rule = f"a multiple of {said}" if op == "%" else f"{op} {said}"
            raise ValueError(f"`{source[size]}` has {size}={value}; cake::{OP} needs {size} {rule}")
    key = tuple(elem[1] if k == "T" else sizes[k] for k in SPEC_KEYS)
    if key not in SPECS:
        for i, k in enumerate(SPEC_KEYS):
            have = sorted({s[i] for s in SPECS})
            if key[i] not in have:
                arg = elem[0] if k == "T" else source[k]
                raise ValueError(f"`{arg}` has {k}={key[i]}, which was not exported (exported: "
                                 f"{', '.join(map(str, have))}); export again with it")
        raise ValueError(f"{', '.join(f'{k}={v}' for k, v in zip(SPEC_KEYS, key))} was not exported together "
                         f"(exported: {list(SPECS)}); export again with it")
    return sizes, key


def check_values(name, lowest, highest, sizes):
    """Raise ValueError unless the values of index input ``name`` (``lowest``..``highest``) lie in its range."""
    for tensor, low, bound in VALUE_RANGES:
        if tensor == name and (lowest < low or highest >= sizes[bound]):
            raise ValueError(f"`{name}` holds {lowest}..{highest}; cake::{OP} needs values in [{low}, {bound}) = "
                             f"[{low}, {sizes[bound]})")


def output_shapes(sizes, key):
    """Each output's (name, shape, dtype name) at the sizes and specialization ``check_arguments`` returned."""
    elem = key[SPEC_KEYS.index("T")] if "T" in SPEC_KEYS else None
    return [(name, tuple(sizes[s] for s in dims), elem if dtype == "T" else dtype) for name, dims, dtype in OUTPUTS]


def _nvcc():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    found = Path(home, "bin", "nvcc") if home else None
    if found is not None and found.exists():
        return str(found)
    path = shutil.which("nvcc")
    if path is None:
        raise RuntimeError(f"cake::{OP} needs nvcc to build {SOURCE} (set CUDA_HOME or put nvcc on PATH), or a "
                           f"prebuilt {_lib_name()} beside {Path(__file__).name}")
    return path


def _lib_name():
    return f"lib{OP}-{SOURCE_SHA256[:16]}.so"


def _source():
    src = Path(__file__).with_name(SOURCE)
    if not src.exists():
        raise RuntimeError(f"cake::{OP} needs {src}, written beside this module by `cake export --torch`")
    if hashlib.sha256(src.read_bytes()).hexdigest() != SOURCE_SHA256:
        raise RuntimeError(f"{src} changed after it was exported: export again")
    return src


def build(beside=False):
    """Build the library with nvcc (beside this module, or in the cache) unless it exists; return its path."""
    src = _source()
    if beside:
        folder = src.parent
    else:
        folder = Path(os.environ.get("CAKE_TORCH_CACHE") or Path.home() / ".cache" / "cake-torch")
    lib = folder / _lib_name()
    if lib.exists():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    tmp = lib.with_name(f"{lib.name}.{os.getpid()}.tmp")
    cmd = [_nvcc(), "-O3", "-std=c++17", f"-gencode=arch=compute_{ARCH},code=sm_{ARCH}", "-shared", "-Xcompiler",
           "-fPIC", "-o", str(tmp), str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"nvcc could not build {src} for sm_{ARCH}:\\n{r.stderr[-4000:]}")
    os.replace(tmp, lib)
    return lib


def library():
    """The launchers' shared library, loaded once (a prebuilt one beside this module first)."""
    global _LIB
    with _LOCK:
        if _LIB is None:
            prebuilt = Path(__file__).with_name(_lib_name())
            _source()
            lib = ctypes.CDLL(str(prebuilt if prebuilt.exists() else build()))
            for launcher, workspace in SPECS.values():
                fn, ws = getattr(lib, launcher), getattr(lib, workspace)
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_void_p] * (len(PARAMS) + 1) + [ctypes.c_int] * len(RUNTIME_SIZES) + [
                    ctypes.c_void_p]
                ws.restype = ctypes.c_size_t
                ws.argtypes = [ctypes.c_int] * len(RUNTIME_SIZES)
            _LIB = lib
        return _LIB


def _described(args, ints):
    tensors = {}
    for (name, _, _), t in zip(INPUTS, args):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"`{name}` must be a torch.Tensor, not {type(t).__name__}")
        tensors[name] = (tuple(t.shape), str(t.dtype).removeprefix("torch."), str(t.device), t.device.type,
                         t.is_contiguous())
    return check_arguments(tensors, dict(zip(SIZE_ARGS, ints)))


def _fake(args, ints):
    sizes, key = _described(args, ints)
    return [args[0].new_empty(shape, dtype=getattr(torch, dtype)) for _, shape, dtype in output_shapes(sizes, key)]


def _run(args, ints):
    sizes, key = _described(args, ints)
    device = args[0].device
    for name, _, _ in VALUE_RANGES:  # the kernel follows these indices into memory: one sync each
        t = dict(zip([i for i, _, _ in INPUTS], args))[name]
        if t.numel():
            check_values(name, int(t.min()), int(t.max()), sizes)
    outs = [torch.empty(shape, dtype=getattr(torch, dtype), device=device)
            for _, shape, dtype in output_shapes(sizes, key)]
    if POISON_OUTPUTS:
        for o in outs:
            o.view(torch.uint8).fill_(0xFF)  # -1 in every int, NaN in every float
    lib = library()
    launcher, workspace = SPECS[key]
    dims = [sizes[s] for s in RUNTIME_SIZES]
    ws = torch.empty(max(1, getattr(lib, workspace)(*dims)), dtype=torch.uint8, device=device)
    tensors = dict(zip([name for name, _, _ in INPUTS], args))
    tensors.update(zip([name for name, _, _ in OUTPUTS], outs))
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        err = getattr(lib, launcher)(*[tensors[p].data_ptr() for p in PARAMS], ws.data_ptr(), *dims, stream)
    if err != 0:
        raise RuntimeError(f"cake::{OP}: {launcher} returned cudaError_t {err}")
    return outs
'''


def write_torch_op(p: OpPlan, out_dir: Path) -> Path:
    """Write ``<op>_op.py`` into ``out_dir`` (beside the exported ``.cu``)."""
    from cake_core.paths import write_text

    path = out_dir / f"{p.op}_op.py"
    write_text(path, render(p))
    return path
