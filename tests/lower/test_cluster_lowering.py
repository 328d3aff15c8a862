"""Lowering of thread-block clusters: the clustered kmeans-assign schedule becomes a kernel with compiled-in
cluster dims, a cluster barrier after barrier init and before exit, multicast TMA copies of row slices
into the swizzled stage, and releases that arrive on every CTA's barrier; NVRTC compiles it without
spills and the SASS holds multicast bulk copies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cake_core import plugins
from cake_core.errors import NotLoweredError
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module
from cake_core.lower.program import lower_program, select_spec
from cake_core.problems import kmeans_assign

SCHEDULES = Path(kmeans_assign.__file__).parent / "schedules"


def _lower(text: str, path: str = "hopper_cluster.cake"):
    reg = plugins.registry()
    target = reg.get("targets", "h200")
    prims = {p.name: p for p in reg.values("primitives")}
    checked = check_module(parse(text, path), prims, target)
    assert checked.ok, [d.message for d in checked.diagnostics if d.is_error]
    return lower_program(checked, target, select_spec(checked, {"D": 128, "T": "bf16"})), target


def _assign(source: str) -> str:
    """The source from the `assign` kernel's signature on (the norms kernel comes first)."""
    return source[source.index("void __launch_bounds__(384") :]


@pytest.mark.parametrize("name", ["hopper_cluster", "explicit/hopper_cluster"])
def test_the_clustered_schedule_lowers_to_cluster_instructions(name: str) -> None:
    lowered, _ = _lower((SCHEDULES / f"{name}.cake").read_text())
    src = _assign(lowered.source)
    assert "__cluster_dims__(2, 1, 1)" in src
    assert "const int crank = (int)(blockIdx.x % 2u);" in src
    # after barrier init (peers' barriers exist before anything lands) and before exit
    assert src.count("barrier.cluster.arrive.release.aligned") == 2
    assert "__syncthreads();" not in src.split("barrier.cluster.arrive")[0].split("fence.mbarrier_init")[1]
    # each rank copies its half of the stage, in both 128-byte panels, to both CTAs (ctaMask 0b11)
    mcast = [ln for ln in src.splitlines() if ".multicast::cluster" in ln]
    assert len(mcast) == 2
    assert all('"h"((unsigned short)3)' in ln and "((crank * SLICE) * 128)" in ln for ln in mcast)
    assert "+ 16384 + ((crank * SLICE) * 128)" in mcast[1]
    # a centroid stage goes back to the producers of both CTAs
    assert re.search(r"mapa\.shared::cluster\.u32 ra, %0, %1; mbarrier\.arrive\.shared::cluster\.b64", src)
    if name == "hopper_cluster":  # the derived bytes: both halves land in this CTA, and its own c_sq row
        assert "bytes=33280]" in src


def test_a_slice_off_the_swizzle_atom_is_not_lowered() -> None:
    text = (SCHEDULES / "hopper_cluster.cake").read_text()
    text = text.replace("tma.load cs[s][crank * SLICE : +SLICE, :]", "tma.load cs[s][crank * 60 : +SLICE, :]")
    with pytest.raises(NotLoweredError, match="multiple of 8 rows"):
        _lower(text)


def test_nvrtc_compiles_it_without_spills_and_the_copies_are_multicast() -> None:
    from cake_core.runtime import sass
    from cake_core.runtime.nvrtc import NvrtcUnavailableError, compile_cuda

    lowered, target = _lower((SCHEDULES / "hopper_cluster.cake").read_text())
    try:
        result = compile_cuda(lowered.source, target.nvrtc_arch)
    except NvrtcUnavailableError as exc:
        pytest.skip(str(exc))
    assert all(k.spill_stores == 0 and k.spill_loads == 0 for k in result.kernels.values()), result.kernels
    if sass.find_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not installed (the `sass` extra): compiled, the SASS was not read")
    text = sass.disassemble(result.cubin)
    assert re.search(r"UTMALDG\.\dD\.MULTICAST", text), "no multicast bulk copy in the SASS"
    assert "UCGABAR_ARV" in text and "UCGABAR_WAIT" in text


def test_a_multicast_copy_reads_its_slice_once_and_writes_it_to_every_cta() -> None:
    from cake_core.ir.sema import CheckCtx

    reg = plugins.registry()
    target = reg.get("targets", "h200")
    prims = {p.name: p for p in reg.values("primitives")}
    checked = check_module(parse((SCHEDULES / "hopper_cluster.cake").read_text()), prims, target)
    model = next(m for (k, spec), m in checked.models.items() if k == "assign" and spec.env["D"] == 128)
    (copy,) = [t for t in model.ops if t.op.name == "tma.load" and t.attr("multicast") is not None]
    cost = copy.prim.cost(copy, CheckCtx(model, copy.role, target))
    assert cost.global_bytes == 64 * 128 * 2 and cost.shared_bytes == 2 * 64 * 128 * 2
