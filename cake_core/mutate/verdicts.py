"""Verdicts on survivors: equivalent (with the argument), or missed (with why nothing saw it).

A survivor passed the verifier, and every standard and exercising interpreter run. It is called
**equivalent** only on an argument checked here, mechanically:

* ``stage-count`` +1: every access of the ring in the *original* is proved in bounds of the original
  stage count by the verifier's bounds reasoning (:class:`~cake_core.verify.domain.KernelDomain`), for
  every specialization and every size of the domain; the mutant indexes the ring with the same
  expressions, so the added stage is never touched (only shared memory grows);
* ``dropped-mask``: the now unmasked access is *proved* in bounds, for every specialization and every
  size, so the mask never acted;
* ``stage-index`` or ``stage-count`` on a shared buffer that no operation of the kernel reads (under
  any specialization): which slot holds what is never observed (the verifier has already checked that
  every write stays in bounds).

Everything else is **missed**, with the reason: which check could have seen it and did not, and for
the operator classes with a known blind spot, that blind spot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cake_core.ir import nodes as n
from cake_core.ir.sema import check_module
from cake_core.verify.domain import KernelDomain
from cake_core.verify.verdicts import Status

if TYPE_CHECKING:
    from cake_core.mutate.operators import Mutant
    from cake_core.mutate.pipeline import Fate, Judge
    from cake_core.mutate.subjects import Subject

#: what each class's mistake breaks, and the blind spot that lets it through where one is known
GAPS: dict[str, str] = {
    "stage-index": "the access uses a neighbouring ring slot, which stays in bounds; no rule relates the slot an "
    "operation uses to the barrier that guards it",
    "parity-flip": "no rule relates a wait's parity to the phase its barrier is in",
    "expect-tx": "no rule compares expect-tx byte counts with the bytes of the copies that complete them",
    "arrival-count": "no rule compares a barrier's arrival count with the arrivals its phases receive",
    "dropped-fence": "the interpreter does not model the async proxy (a missing `fence.proxy_async` goes unseen, "
    "see cake_core.semantics.interp), and no rule checks proxy fences",
    "dropped-mask": "the access is not proved in bounds, and no sampled size or interpreter run breaks it",
    "wait-arrive-swap": "no rule checks the order of waits and arrives on a role's barriers",
    "stage-count": "the ring's depth changed while its indices did not",
}


def survivor_verdict(
    judge: Judge, subject: Subject, mutant: Mutant, module: n.Module, *, runs: int, interpreted: bool
) -> tuple[Fate, str]:
    """The verdict on a survivor and its reason (see the module documentation)."""
    from cake_core.mutate.pipeline import Fate

    if mutant.operator == "stage-count" and mutant.variant == "+1":
        proved = _ring_proved(judge, subject, mutant.kernel, mutant.subject)
        if proved:
            return Fate.EQUIVALENT, (
                f"every access of `{mutant.subject}` in the original is proved in bounds of its original stage "
                "count for every size, and the mutant indexes it alike: the added stage is never used"
            )
    if mutant.operator == "dropped-mask":
        status = _unmasked_status(judge, subject, mutant)
        if status is Status.PROVED:
            return Fate.EQUIVALENT, "the unmasked access is proved in bounds for every size: the mask never acted"
    if mutant.operator in ("stage-index", "stage-count") and _never_read(judge, subject, mutant.kernel, mutant.subject):
        return Fate.EQUIVALENT, (
            f"no operation reads `{mutant.subject}` (it is only written), so which of its slots holds what is never "
            "observed; the verifier checked that the writes stay in bounds"
        )
    gap = GAPS.get(mutant.operator, "nothing checks this kind of edit")
    if mutant.operator == "arrival-count" and _count_zero(judge, subject, mutant):
        gap = (
            "the edit leaves an arrival count of 0, outside `mbarrier.init`'s range (1 to 2^20-1 in PTX): the type "
            "checker and the rules accept it, and the interpreter completes a phase once `arrived >= count` and no "
            "bytes are outstanding, so a phase gated by expect-tx completes exactly as with count 1"
        )
    tried = (
        f"{runs} interpreter runs (standard and exercising shapes, sequential and random schedules) found no fault, "
        "race, deadlock or wrong answer" if interpreted else "the interpreter was not run"
    )
    return Fate.MISSED, f"{gap}; the verifier gave no error and {tried}"


def _models(judge: Judge, subject: Subject, module: n.Module, kernel: str) -> list[Any]:
    target = judge.registry.get("targets", subject.target)
    checked = check_module(module, judge.primitives, target)
    return checked.kernel_models(kernel) if checked.ok else []


def _ring_proved(judge: Judge, subject: Subject, kernel: str, ring: str) -> bool:
    """Whether every access of ``ring`` in the original is proved in bounds, under every specialization."""
    models = _models(judge, subject, subject.module, kernel)
    found = False
    for model in models:
        for av in KernelDomain(model).accesses():
            if av.operand.name != ring:
                continue
            found = True
            if av.verdict.status is not Status.PROVED:
                return False
    return found


def _never_read(judge: Judge, subject: Subject, kernel: str, name: str) -> bool:
    """Whether ``name`` is a shared buffer that no operation of the original kernel reads."""
    from cake_core.ir.primitive import Access, Kind

    models = _models(judge, subject, subject.module, kernel)
    if not models:
        return False
    for model in models:
        if name not in model.smem:
            return False
        for typed in model.ops:
            for eff in typed.prim.effects(typed):
                o = eff.operand
                if o.name == name and o.kind is Kind.SHARED and eff.access in (Access.READ, Access.READWRITE):
                    return False
    return True


def _count_zero(judge: Judge, subject: Subject, mutant: Mutant) -> bool:
    """Whether the mutant's barrier ``mutant.subject`` has an arrival count of 0 under some specialization."""
    from cake_core.ir.exprs import try_int

    for model in _models(judge, subject, mutant.module, mutant.kernel):
        info = model.barriers.get(mutant.subject)
        if info is not None and try_int(info.decl.count, model.env) == 0:
            return True
    return False


def _unmasked_status(judge: Judge, subject: Subject, mutant: Mutant) -> Status | None:
    """The weakest verdict, over the specializations, of the access a dropped mask uncovered."""
    rank = {Status.PROVED: 0, Status.MASKED: 0, Status.SAMPLED: 1, Status.VIOLATED: 2}
    worst: Status | None = None
    for model in _models(judge, subject, mutant.module, mutant.kernel):
        domain = KernelDomain(model)
        for typed in model.ops:
            if typed.op.name != mutant.subject or typed.op.loc.line != mutant.loc.line:
                continue
            for eff in typed.prim.effects(typed):
                if eff.operand.slot.mask_attr is None or eff.operand.name is None:
                    continue
                status = domain.access(typed, eff).status
                if worst is None or rank[status] > rank[worst]:
                    worst = status
    return worst
