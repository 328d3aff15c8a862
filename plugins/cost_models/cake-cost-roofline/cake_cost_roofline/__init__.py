"""cake-cost-roofline: an analytic cost model from target data alone (*uncalibrated*).

For each launch of a checked program at concrete sizes, the work of the busiest CTA is counted
(:func:`cake_core.cost.counts.executions`: how often each operation runs) and multiplied by each
operation's declared cost terms (``Primitive.cost``: flops, tensor-core flops, global and shared bytes, atomics).
Each kind of work is then timed at the rate the target record gives for it:

==============  ===================================================================================
term            time
==============  ===================================================================================
dram            every tensor the kernel touches, once, plus the share of its re-reads that L2 cannot hold
                (none for a tensor that fits in L2), at the DRAM bandwidth (the measured copy bandwidth
                where the target has one)
l2              the global bytes the CTAs move that they have not moved before (a re-read on every trip of
                a loop its index does not depend on is a cache hit), at 64 B per clock per SM
shared          shared-memory bytes, and the cache hits above, at 128 B per clock per SM; a load from
                shared memory into a register tile whose layout gives each warp of a warp grid its own
                copy (``mma_a``, ``mma_b`` fragments) moves every copy
tensor          tensor-core flops at the target's dense rate for the element type (the measured rate
                where the target has one)
fp32            other flops at the fp32 rate
issue           instructions the CUDA cores issue (one per register-tile element a thread holds, copies
                included, per operation), 4 warp instructions per clock per SM
sync            barrier waits of the busiest CTA (mbarrier waits and CTA-wide barriers such as
                ``bar.sync``), ~64 clocks each, on its critical path
stall           global reads an operation waits for (not ``cp.async`` or TMA, which complete later) in a
                role fed through mbarriers (it waits on a pipe's stage or a copy's completion): one round
                trip each (:data:`GLOBAL_READ_CLOCKS`) on the critical path of the role that waits longest;
                its instances wait side by side. Such a role (warp specialization) runs one CTA per SM with
                every warp held by the same stage, so nothing hides the trip. The reads of a one-role
                kernel are not counted: other CTAs and the copies in flight hide them, and counting them
                (even divided by the resident CTAs) ranked the measured Ampere sweep worse (Spearman 0.87
                -> 0.80, bench/results/2026-12-02-h200-cost-rank-stall.json)
atomics         reductions into global memory (``red.global``, ``atom.global``) as the L2's atomic units take
                them, one request per 32-byte sector a warp instruction updates (``CostTerms.global_atomics``),
                at :data:`ATOMIC_REQUESTS_PER_CLOCK` for the whole GPU; and atomic operations on shared memory,
                one per element, at :data:`SHARED_ATOMICS_PER_CLOCK_PER_SM`. Added to the throughput term,
                not hidden under it: the warps that issue them do nothing else meanwhile (measured:
                kmeans-iter's hopper.cake, 1.74 ms, is kmeans-assign's hopper.cake, 1.09 ms, plus 0.65 ms; the
                same scatter in the same layout makes kmeans-update's vector.cake 0.64 ms slower than its
                estimate without atomics)
latency         one memory round trip (~1 us) per CTA wave: a pipeline's first stage
launch          3 us per kernel launch
==============  ===================================================================================

A launch takes ``launch + latency + sync + stall + (max(dram, l2, shared, tensor, fp32, issue) + atomics) /
efficiency``, where the efficiency is the wave quantization (CTAs over the resident slots, occupancy from the
target's limits). The largest term names the **bound**. Three figures are taken from measurements on the
H200, the round trip of a waited-for global read (:data:`GLOBAL_READ_CLOCKS`) and the two atomic rates below;
nothing is fitted per run: every estimate says ``calibrated: false``, and ``update`` learns nothing.

The atomic rates, from kmeans-update at B=32, N=65536, K=1024, D=128 bf16
(``bench/results/2026-12-02-h200-kmeans-update-3.json`` and ``-4.json``; lowest run). Both scatters add 2^28
f32 (1 GiB), and the model without atomics predicts 0.167 ms for each. What each measurement implies for a
rate, with the rest of the estimate as it stands:

================  =============================  =========  ==============  ============  ============
schedule          scatter on sm_90               measured   bytes added     instructions  L2 requests
================  =============================  =========  ==============  ============  ============
atomic.cake       ``red.global.add.v4.f32``,     1.057 ms   1.23 TB/s       2^26:         2^26:
                  each lane its own row                                     39.8 / clock  39.8 / clock
vector.cake       ``red.global.add.v2.f32``,     0.811 ms   1.71 TB/s       2^27:         2^25:
                  a quad's 8 columns, 32 B                                  114 / clock   28.4 / clock
================  =============================  =========  ==============  ============  ============

Bytes added cannot tell the two apart: one rate predicts the same time for both (they run 1.3x apart), the
rates they imply 1.4x apart. Instructions order them the wrong way round (implied rates 2.9x apart); L2
requests order them right (implied rates 1.4x apart). So the model counts requests, at 34 per clock (67 G/s
at 1.98 GHz): the rate at which the two predictions (1.21 and 0.71 ms) miss by the same factor, the geometric mean of predicted over measured being 1. The shared rate, 1.1
per clock per SM, makes privatized.cake (2^28 f32 adds into shared memory, its flush 2^23 requests) 1.31 ms
as measured. With these two constants the model orders every measured cell of kmeans-update (10 cells, 2 to
6 schedules each) and kmeans-iter (12 cells, hopper < fused) as measured; 0.3.0 averaged Spearman 0.685 and
-0.167 (``bench/results/2026-12-02-h200-cost-rank-kmeans-*-roofline-*.json``, ``bench/cost_rank.py
--records``). Counting both bytes (1.71 TB/s) and requests (39.8 per clock), the larger of the two per launch,
fits the reference cell exactly but ordered one kmeans-iter cell in twelve wrongly (average 0.833): not kept.
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from cake_core.cost.counts import executions, grid_size
from cake_core.cost.model import CostModel, Estimate, LaunchEstimate
from cake_core.hookspecs import hookimpl
from cake_core.ir.exprs import compile_expr
from cake_core.ir.model import CheckedModule, KernelModel, LaunchModel
from cake_core.ir.primitive import Access, BarrierAction, Kind, numel, static_shape
from cake_core.ir.program import kernel_spec
from cake_core.ir.sema import CheckCtx
from cake_core.target import Target

__version__ = "0.4.0"

#: clocks and per-clock rates the model assumes where the target record has no figure
L2_BYTES_PER_CLOCK_PER_SM = 64
SHARED_BYTES_PER_CLOCK_PER_SM = 128
ISSUE_PER_CLOCK_PER_SM = 4
SYNC_CLOCKS = 64
MEMORY_LATENCY_MS = 1e-3
#: clocks a role waits for a global read it issues and uses at once (an L2 hit): 780, from the H200's
#: measured 0.198 ms between hopper.cake and its variant that reads the centroid norms from global memory in
#: its epilogue, 504 such reads on the busiest CTA's path at 1.98 GHz
#: (bench/results/2026-12-01-h200-chain-waypoints/ablation.json: ``h_nocsq`` 1.285 ms against 1.087 ms)
GLOBAL_READ_CLOCKS = 780
LAUNCH_MS = 3e-3
#: requests the L2's atomic units take per clock, whole GPU, and atomic operations on shared memory per clock
#: per SM (an f32 add there is a compare-and-swap loop on sm_90): measured, the module docstring's ``atomics``
ATOMIC_REQUESTS_PER_CLOCK = 34
SHARED_ATOMICS_PER_CLOCK_PER_SM = 1.1
#: the tensor-core rate keys of a target record, by Cake element type
_TENSOR_KEY = {"bf16": "bf16", "f16": "fp16", "f32": "tf32", "fp8": "fp8"}
_MEASURED_TENSOR = {"bf16": "bf16_tflops", "f16": "fp16_tflops"}


class Roofline:
    """The roofline model (see the module docstring)."""

    name = "roofline"
    version = __version__
    calibrated = False

    def estimate(self, checked: CheckedModule, target: Target, values: Mapping[str, int | str]) -> Estimate:
        launches = tuple(self.launch(checked, lm, target, values) for lm in checked.launches)
        longest = max(launches, key=lambda x: x.ms) if launches else None
        return Estimate(
            self.name, self.version, self.calibrated, sum(x.ms for x in launches),
            longest.bound if longest is not None else "none", launches,
            ("uncalibrated: rates from target data alone, nothing fitted to measurements", self.basis(target)),
        )  # fmt: skip

    def basis(self, target: Target) -> str:
        """Where the rates for ``target`` come from, in one sentence: its measured ceilings, or the datasheet
        alone (a part no one has measured here, such as ``b200``: uncalibrated datasheet figures)."""
        measured = sorted(c.metric for c in target.measured)
        if measured:
            return (f"Its {target.name} rates: measured {', '.join(measured)} on the part; the others are "
                    "datasheet figures.")  # fmt: skip
        return (f"Its {target.name} rates are datasheet figures, uncalibrated: the target record has no measured "
                "ceiling.")  # fmt: skip

    def update(self, estimates: Sequence[Estimate], measured_ms: Sequence[float]) -> None:
        """An analytic model learns nothing from measurements (``calibrated`` stays False)."""

    def launch(self, checked: CheckedModule, lm: LaunchModel, target: Target,
               values: Mapping[str, int | str]) -> LaunchEstimate:  # fmt: skip
        k = lm.kernel
        spec = kernel_spec(lm, values)
        model = checked.models.get((k.name, spec)) if spec is not None else None
        if model is None:
            raise ValueError(f"kernel `{k.name}` has no specialization for {dict(values)}")
        sizes = _SIZES.get(lm)
        if sizes is None:
            sizes = _SIZES[lm] = [(name, compile_expr(expr)) for name, expr in lm.sizes.items()]
        env: dict[str, Any] = {"SMS": target.sm_count}
        for name, fn in sizes:
            env[name] = fn(values)
        env.update(model.env)
        work = _work(model, env, target)
        ctas = grid_size(model, env)
        slots = target.sm_count * _ctas_per_sm(model, target)
        waves = max(1, math.ceil(ctas / slots)) if ctas else 1
        # An SM's throughput is shared by the CTAs resident on it, so what a grid loses to quantization is
        # the SMs left idle while the busiest finish: CTAs per SM against its whole-number ceiling. (Counted
        # per slot instead, a persistent grid of one CTA per SM on SMs with room for two looked half idle.)
        per_sm = ctas / target.sm_count
        efficiency = per_sm / math.ceil(per_sm) if ctas else 1.0
        clock_hz = target.boost_clock_mhz * 1e6
        sms = target.sm_count
        dram_gbs = target.ceiling("copy_gbs") or target.dram_bandwidth_gbs
        # Every tensor crosses DRAM once. A CTA re-reading what it read before (an index that does not
        # depend on the loop) is served by its caches; what distinct CTAs read again comes from L2 when
        # the tensor fits there, else from DRAM.
        dram_bytes = l2_bytes = l1_bytes = 0.0
        for name, size in work["tensor_bytes"].items():
            moved = work["moved"].get(name, 0.0) * ctas
            distinct = min(work["distinct"].get(name, 0.0) * ctas, moved)
            dram_bytes += size if size <= target.l2_bytes else max(size, distinct)
            l2_bytes += distinct
            l1_bytes += moved - distinct
        terms = {
            "dram": dram_bytes / (dram_gbs * 1e9) * 1e3,
            "l2": l2_bytes / (sms * L2_BYTES_PER_CLOCK_PER_SM * clock_hz) * 1e3,
            "shared": (work["shared_bytes"] * ctas + l1_bytes) / (sms * SHARED_BYTES_PER_CLOCK_PER_SM * clock_hz) * 1e3,
            "tensor": sum(f * ctas / (_tensor_tflops(target, dt) * 1e12) * 1e3 for dt, f in work["tensor"].items()),
            "fp32": work["fp32_flops"] * ctas / (target.fp32_tflops * 1e12) * 1e3,
            "issue": work["warp_instructions"] * ctas / (sms * ISSUE_PER_CLOCK_PER_SM * clock_hz) * 1e3,
        }
        throughput = max(terms.values())
        bound = max(terms, key=terms.__getitem__)
        # the atomic units' time adds to the rest: the warps that issue the reductions do nothing else meanwhile
        clocks = (work["atomic_requests"] / ATOMIC_REQUESTS_PER_CLOCK
                  + work["shared_atomics"] / (sms * SHARED_ATOMICS_PER_CLOCK_PER_SM))
        terms["atomics"] = clocks * ctas / clock_hz * 1e3
        if terms["atomics"] > throughput:
            bound = "atomics"
        busy = throughput + terms["atomics"]
        terms["sync"] = work["waits"] * SYNC_CLOCKS / clock_hz * 1e3 * waves
        terms["stall"] = work["stalls"] * GLOBAL_READ_CLOCKS / clock_hz * 1e3 * waves
        terms["latency"] = MEMORY_LATENCY_MS * waves
        terms["launch"] = LAUNCH_MS
        # wave quantization: the throughput time lost to a last wave that leaves SMs idle
        terms["waves"] = busy / max(efficiency, 1e-9) - busy
        ms = terms["launch"] + terms["latency"] + terms["sync"] + terms["stall"] + busy + terms["waves"]
        exposed = {k: terms[k] for k in ("latency", "sync", "stall")}
        if sum(exposed.values()) > busy:
            bound = max(exposed, key=exposed.__getitem__)
        return LaunchEstimate(k.name, ms, bound, terms, ctas, waves)


@attrs.frozen
class _OpWork:
    """What one execution of one operation by one role instance costs, and what it moves: fixed by the
    kernel model (static shapes), so computed once per model."""

    key: int  # the id of the operation's node
    role: int  # the id of its role's node
    instances: int
    shared_bytes: float
    tensor_flops: float
    tensor_dtype: str
    fp32_flops: float
    warp_instructions: float
    waits: int
    atomic_requests: float  # requests to the L2's atomic units (``CostTerms.global_atomics``)
    shared_atomics: float  # atomic operations on shared memory
    stalls: int  # global reads it waits for: 1, or 0 where it reads none, its copy completes later, or its role
    #              is not fed through mbarriers (the module docstring's `stall`)
    moves: tuple[tuple[str, float], ...]  # (global tensor, bytes) per access


#: each launch's kernel sizes as compiled functions of the program's
_SIZES: weakref.WeakKeyDictionary[LaunchModel, list[tuple[str, Any]]] = weakref.WeakKeyDictionary()
_STATIC: weakref.WeakKeyDictionary[KernelModel, tuple[list[_OpWork], list[tuple[str, tuple, int]]]] = (
    weakref.WeakKeyDictionary()
)


def _static(model: KernelModel, target: Target) -> tuple[list[_OpWork], list[tuple[str, tuple, int]]]:
    """Each operation's work, and each global parameter's (name, shape, element bytes), of ``model``."""
    hit = _STATIC.get(model)
    if hit is not None:
        return hit
    ops = []
    fed: set[int] = set()  # roles that wait on an mbarrier phase (a pipe's stage, a copy's completion)
    ctx_of: dict[int, CheckCtx] = {}
    for typed in model.ops:
        ctx = ctx_of.get(id(typed.role))
        if ctx is None:
            ctx = ctx_of[id(typed.role)] = CheckCtx(model, typed.role, target)
        c = typed.prim.cost(typed, ctx)
        threads = typed.role.per * 32
        per_thread = copies = 1.0
        for o in typed.outs + typed.ins:
            shape = static_shape(o) if o.kind is Kind.REGISTERS else None
            if shape:
                held = _held_elements(model, o, shape)
                per_thread = max(per_thread, held / threads)
                if o in typed.outs:
                    copies = max(copies, held / max(numel(shape), 1))
        shared_bytes = c.shared_bytes * copies if any(o.kind is Kind.SHARED for o in typed.ins) else c.shared_bytes
        waits, moves, stalls = int(typed.prim.cta_barrier), [], 0
        for e in typed.prim.effects(typed):
            if e.barrier is BarrierAction.WAIT:
                waits += 1
                fed.add(id(typed.role))
            elif e.tier is Kind.GLOBAL and e.access is not Access.NONE and e.operand.name:
                stalls = int(stalls or (e.access is Access.READ and not e.asynchronous))
                shape = static_shape(e.operand)
                if shape is not None and e.operand.dtype is not None:
                    moves.append((e.operand.name, float(numel(shape) * e.operand.dtype.bytes)))
        ops.append(_OpWork(id(typed.op), id(typed.role), typed.role.instances, shared_bytes, c.tensor_flops,
                           c.dtype or "bf16", c.flops - c.tensor_flops, per_thread * typed.role.per, waits,
                           c.global_atomics, c.shared_atomics, stalls, tuple(moves)))  # fmt: skip
    ops = [w if w.role in fed else attrs.evolve(w, stalls=0) for w in ops]
    params = [(p.name, tuple(compile_expr(x) for x in p.shape), model.param_dtype(p).bytes)
              for p in model.kernel.params if p.tier == "global"]  # fmt: skip
    _STATIC[model] = (ops, params)
    return ops, params


def _held_elements(model: KernelModel, operand: Any, shape: tuple[int, ...]) -> float:
    """Elements of a register operand the role instance's threads hold together: the tile's own count,
    or more where its layout gives each warp of a warp grid its own copy (an ``mma_a`` fragment is
    held by every warp of a grid row, so ``WN`` times)."""
    info = model.regs.get(operand.name) if operand.name else None
    if info is None or operand.dtype is None:
        return float(numel(shape))
    whole = numel(info.shape)
    held = info.layout.regs_per_thread * 4 * info.layout.threads / operand.dtype.bytes
    return numel(shape) * max(1.0, held / max(whole, 1))


def _work(model: KernelModel, env: Mapping[str, Any], target: Target) -> dict[str, Any]:
    """The busiest CTA's work: bytes, flops by kind, warp instructions and barrier waits; and the bytes
    of every tensor the kernel touches once (its compulsory traffic)."""
    ops, params = _static(model, target)
    counts = executions(model, env)
    distinct: dict[str, float] = defaultdict(float)  # bytes of each tensor a CTA reads or writes once
    tensor: dict[str, float] = defaultdict(float)
    moved: dict[str, float] = defaultdict(float)  # bytes each global tensor's accesses move, per CTA
    shared = fp32 = instructions = waits = 0.0
    atomics = dict.fromkeys(("atomic_requests", "shared_atomics"), 0.0)
    stalls: dict[int, float] = defaultdict(float)  # by role: its instances run side by side
    for w in ops:
        stalls[w.role] += w.stalls * counts.times.get(w.key, 0.0)
        times = counts.times.get(w.key, 0.0) * w.instances
        if not times:
            continue
        shared += w.shared_bytes * times
        if w.tensor_flops:
            tensor[w.tensor_dtype] += w.tensor_flops * times
        fp32 += w.fp32_flops * times
        instructions += w.warp_instructions * times
        waits += w.waits * times
        atomics["atomic_requests"] += w.atomic_requests * times
        atomics["shared_atomics"] += w.shared_atomics * times
        for name, nbytes in w.moves:
            moved[name] += nbytes * times
            distinct[name] += nbytes * counts.distinct.get((w.key, name), 0.0) * w.instances
    sizes: dict[str, float] = {}
    for name, shape, elem in params:
        size = 1
        for fn in shape:
            size *= max(int(fn(env)), 0)
        sizes[name] = float(size * elem)
    return {"shared_bytes": shared, "fp32_flops": fp32, "warp_instructions": instructions, "waits": waits,
            "stalls": max(stalls.values(), default=0.0), **atomics, "tensor": tensor, "tensor_bytes": sizes,
            "moved": moved, "distinct": distinct}  # fmt: skip


def _ctas_per_sm(model: KernelModel, target: Target) -> int:
    """Resident CTAs per SM by shared memory, threads and the target's CTA limit (and a promised occupancy)."""
    by_smem = target.smem_per_sm // max(model.smem_bytes + target.smem_reserved_per_block, 1)
    by_threads = target.max_threads_per_sm // max(model.threads, 1)
    n = max(1, min(by_smem, by_threads, target.max_ctas_per_sm))
    return n


def _tensor_tflops(target: Target, dtype: str) -> float:
    measured = _MEASURED_TENSOR.get(dtype)
    value = target.ceiling(measured) if measured else None
    if value:
        return value
    rate = target.tensor_tflops.get(_TENSOR_KEY.get(dtype, dtype))
    return rate or target.fp32_tflops


@hookimpl
def cake_register_cost_models(register: Callable[[CostModel], None]) -> None:
    register(Roofline())
