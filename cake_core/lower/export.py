"""Standalone export: a ``.cu`` file with the kernels and a host launcher, plus a C header.

The exported source needs no Cake: build it with ``nvcc -gencode=arch=compute_<sm>,code=sm_<sm>
-shared -Xcompiler -fPIC`` and call the launcher from C, C++ or ctypes. Device code is the lowering's
header-free CUDA; the host launcher uses the CUDA runtime and, where the kernels take TMA tensor
maps, encodes them with the driver's ``cuTensorMapEncodeTiled`` fetched through
``cudaGetDriverEntryPoint`` (no ``-lcuda`` needed).

For a program ``P`` the header declares, per specialization ``S`` (``T_bf16__D_128``):

    size_t cake_P__S_workspace_bytes(<sizes>);           // bytes of scratch the launch needs
    int    cake_P__S(<tensors>, void* workspace, <sizes>, cudaStream_t stream);   // a cudaError_t

Tensors are device pointers in the program's parameter order; sizes are the program's run-time sizes
in sorted order. The workspace holds the program's intermediate buffers (256-byte aligned each).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from cake_core import __version__
from cake_core.ir import nodes as n
from cake_core.ir.exprs import to_c
from cake_core.ir.model import CheckedModule
from cake_core.ir.types import DType
from cake_core.lower.cuda import c_name, storage
from cake_core.lower.program import LoweredProgram
from cake_core.paths import make_dir, write_text

_TMAP_DTYPE = {DType.BF16: "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", DType.F16: "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
               DType.F32: "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", DType.I32: "CU_TENSOR_MAP_DATA_TYPE_INT32"}  # fmt: skip
_TMAP_SWIZZLE = {"none": "CU_TENSOR_MAP_SWIZZLE_NONE", "32B": "CU_TENSOR_MAP_SWIZZLE_32B",
                 "64B": "CU_TENSOR_MAP_SWIZZLE_64B", "128B": "CU_TENSOR_MAP_SWIZZLE_128B"}  # fmt: skip


@attrs.frozen
class Exported:
    source: str
    header: str
    functions: tuple[str, ...]  # launcher names
    workspace_functions: tuple[str, ...]


def runtime_sizes(checked: CheckedModule) -> list[str]:
    prog = checked.module.entry
    names: list[str] = []
    for p in prog.params:
        for e in p.shape:
            for s in n.walk_expr(e):
                if isinstance(s, n.Name) and s.id not in names:
                    names.append(s.id)
    fixed = {c.var for c in prog.domain if c.op == "in"}
    return sorted(x for x in names if x not in fixed)


def _launcher(lp: LoweredProgram, stem: str) -> tuple[str, str, str, str]:
    """(C++ launcher source, prototype, workspace function source, its prototype)."""
    checked = lp.checked
    prog = checked.module.entry
    spec_env = dict(lp.spec.values)
    sizes = runtime_sizes(checked)
    tag = "__".join(f"{k}_{v}" for k, v in lp.spec.values)
    base = re.sub(r"[^A-Za-z0-9_]", "_", f"cake_{stem}" + (f"__{tag}" if tag else ""))

    def cexpr(e: n.Expr, env: dict[str, str]) -> str:
        return to_c(e, lambda name: env.get(name, str(spec_env.get(name, name))))

    size_env = {s: s for s in sizes}
    args = [f"void* {c_name(p.name)}" for p in prog.params]
    size_args = [f"int {s}" for s in sizes]
    proto = f'extern "C" cudaError_t {base}({", ".join(args + ["void* workspace"] + size_args + ["cudaStream_t stream"])})'
    ws_proto = f'extern "C" size_t {base}_workspace_bytes({", ".join(size_args) or "void"})'

    def elem_bytes(dtype: str) -> int:
        dt = spec_env.get(dtype, dtype)
        return DType(str(dt)).bytes

    # workspace: program buffers, 256-byte aligned
    ws_lines, body = [], []
    ws_lines.append("  size_t total = 0;")
    body.append("  size_t cake_off = 0; (void)cake_off;")
    for buf in prog.buffers:
        count = " * ".join(f"(size_t)({cexpr(e, size_env)})" for e in buf.shape) or "1"
        ws_lines.append(f"  total = (total + 255) / 256 * 256 + {count} * {elem_bytes(buf.dtype)};")
        body.append(f"  cake_off = (cake_off + 255) / 256 * 256; void* {c_name(buf.name)} = (char*)workspace + cake_off; "
                    f"cake_off += {count} * {elem_bytes(buf.dtype)};")  # fmt: skip
    ws_lines.append("  return total;")
    shapes = {p.name: (p.dtype, p.shape) for p in prog.params}
    shapes.update({b.name: (b.dtype, b.shape) for b in prog.buffers})
    body.append("  cudaError_t cake_err = cudaSuccess;")
    for i, lk in enumerate(lp.kernels):
        m = lk.model
        lm = next(x for x in checked.launches if x.launch is lk.launch)
        kenv = {name: f"({cexpr(e, size_env)})" for name, e in lm.sizes.items()}
        for name, v in m.env.items():
            if isinstance(v, int):
                kenv.setdefault(name, str(v))
        grid = [cexpr(e, kenv) for e in m.kernel.grid.extents] + ["1"] * (3 - len(m.kernel.grid.extents))
        body.append(f"  {{  // launch {i}: {lk.launch.kernel}")
        kargs = [f"({storage(m.param_dtype(p))}*){c_name(a)}" for a, p in zip(lk.launch.args, m.kernel.params, strict=True)]
        kargs += [kenv[s] if s in kenv else s for s in m.runtime_sizes]
        for j, tm in enumerate(lk.tensor_maps):
            tensor = dict(zip((p.name for p in m.kernel.params), lk.launch.args, strict=True))[tm.param]
            dtype, dims_e = shapes[tensor]
            dims = [cexpr(e, size_env) for e in reversed(dims_e)]
            eb = elem_bytes(dtype)
            strides, acc = [], str(eb)
            for d in dims[:-1]:
                acc = f"{acc} * (cuuint64_t)({d})"
                strides.append(acc)
            rank = len(dims)
            body.append(f"    CUtensorMap cake_m{j}; cake_tmap cake_t{j};")
            body.append(f"    {{ cuuint64_t dims[{rank}] = {{{', '.join(f'(cuuint64_t)({d})' for d in dims)}}};")
            body.append(f"      cuuint64_t strides[{max(rank - 1, 1)}] = {{{', '.join(strides) or '0'}}};")
            body.append(f"      cuuint32_t box[{rank}] = {{{', '.join(str(b) for b in tm.box)}}};")
            body.append(f"      cuuint32_t estr[{rank}] = {{{', '.join('1' for _ in range(rank))}}};")
            body.append(f"      CUresult r = cake_encode_tiled()(&cake_m{j}, {_TMAP_DTYPE[tm.dtype]}, {rank}, {c_name(tensor)}, dims, "
                        f"strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, {_TMAP_SWIZZLE[tm.swizzle]}, "
                        f"CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);")  # fmt: skip
            body.append("      if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;")
            body.append(f"      memcpy(&cake_t{j}, &cake_m{j}, sizeof(cake_t{j})); }}")
            kargs.append(f"cake_t{j}")
        body.append(f"    const dim3 cake_grid({', '.join(grid)});")
        body.append(f"    if (cake_grid.x == 0 || cake_grid.y == 0 || cake_grid.z == 0) return cudaErrorInvalidConfiguration;")
        if m.smem_bytes > 48 * 1024:
            body.append(f"    cake_err = cudaFuncSetAttribute({lk.function}, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                        f"{m.smem_bytes}); if (cake_err != cudaSuccess) return cake_err;")  # fmt: skip
        body.append(f"    {lk.function}<<<cake_grid, {m.threads}, {m.smem_bytes}, stream>>>({', '.join(kargs)});")
        body.append("    cake_err = cudaGetLastError(); if (cake_err != cudaSuccess) return cake_err;")
        body.append("  }")
    body.append("  return cudaSuccess;")
    src = proto + " {\n" + "\n".join(body) + "\n}\n"
    ws = ws_proto + " {\n" + "\n".join(ws_lines) + "\n}\n"
    return src, proto + ";", ws, ws_proto + ";"


_HOST_PRELUDE = r"""
// ---- host launcher: needs the CUDA runtime; tensor maps via the driver entry point (no -lcuda) ----
#include <cuda.h>
#include <cuda_runtime.h>
#include <string.h>
#include <stddef.h>

typedef CUresult (*cake_encode_tiled_fn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                         const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                         CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static cake_encode_tiled_fn cake_encode_tiled() {
  static cake_encode_tiled_fn fn = 0;
  if (!fn) {
    void* p = 0;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = (cake_encode_tiled_fn)p;
  }
  return fn;
}
"""


def export_program(lowered: Sequence[LoweredProgram], stem: str) -> Exported:
    """The lowered specializations of one program as one standalone ``.cu`` with host launchers and a header."""
    checked, target = lowered[0].checked, lowered[0].target
    device = []
    launchers, protos, wss, ws_protos, names, ws_names = [], [], [], [], [], []
    for lp in lowered:
        # each specialization's source repeats the prelude; keep one copy of the device code
        device.append(lp.source)
        src, proto, ws, ws_proto = _launcher(lp, stem)
        launchers.append(src)
        wss.append(ws)
        protos.append(proto)
        ws_protos.append(ws_proto)
        names.append(proto.split("(")[0].split()[-1])
        ws_names.append(ws_proto.split("(")[0].split()[-1])
    device_code = _merge_sources(device)
    source = device_code + _HOST_PRELUDE + "\n" + "\n".join(wss + launchers)
    guard = re.sub(r"[^A-Za-z0-9]", "_", stem).upper() + "_CAKE_H"
    header = (
        f"// Generated by Cake {__version__}: launchers for {checked.module.path} on {target.name} ({target.nvrtc_arch}).\n"
        f"// Device pointers in program parameter order, then a device workspace of at least the bytes its\n"
        f"// `_workspace_bytes` function returns for the sizes (NULL when that is 0); sizes: "
        f"{', '.join(runtime_sizes(checked)) or 'none'}.\n"
        f"// Each launcher returns a cudaError_t (cudaSuccess, 0, on success) and is asynchronous on `stream`.\n"
        f"#ifndef {guard}\n#define {guard}\n#include <stddef.h>\n#include <cuda_runtime.h>\n"
        + "\n".join(ws_protos + protos) + f"\n#endif  // {guard}\n"
    )  # fmt: skip
    return Exported(source, header, tuple(names), tuple(ws_names))


def _merge_sources(sources: list[str]) -> str:
    """One file from several lowered sources: the first prelude, every distinct helper and kernel."""
    if len(sources) == 1:
        return sources[0]
    blocks: list[str] = []
    seen: set[str] = set()
    for src in sources:
        for block in src.split("\n\n"):
            key = block.strip()
            if key.startswith("// Generated by Cake") and blocks:
                continue
            if key in seen:
                continue
            seen.add(key)
            blocks.append(block)
    return "\n\n".join(blocks)


def write_export(exported: Exported, out_dir: Path, stem: str) -> tuple[Path, Path]:
    make_dir(out_dir)
    cu, h = out_dir / f"{stem}.cu", out_dir / f"{stem}.h"
    write_text(cu, exported.source)
    write_text(h, exported.header)
    return cu, h

