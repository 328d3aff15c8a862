"""The execution model the interpreter and the protocol replay share (`cake_core.semantics.engine`,
`barriers`, `clocks`, `boxes`), and the host arrays the interpreter takes (`cake_core.hostdata`)."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core.errors import CakeUserError
from cake_core.hostdata import element_dtype, host_array
from cake_core.ir.types import DType
from cake_core.semantics.barriers import BarState
from cake_core.semantics.boxes import contains, meet, overlaps
from cake_core.semantics.clocks import join
from cake_core.semantics.engine import CTA, DONE, READY, Cta, Group, RoleInstance, Transfer

# -- barriers -----------------------------------------------------------------------------------------


def test_a_phase_completes_at_its_arrivals_with_no_bytes_outstanding() -> None:
    bar = BarState("full", 0, count=2)
    assert bar.ready(1) and not bar.ready(0)  # nothing completed: the phase of parity 0 has not
    assert not bar.signal(128, {0: 3}, 1, "role `producer`")  # arrive.expect_tx: one of two, bytes out
    assert not bar.signal(0, {1: 5}, 1)
    assert bar.arrived == 2 and bar.tx == 128
    assert bar.complete_tx(128, {2: 1})
    assert bar.completed == 1 and bar.ready(0) and not bar.ready(1)
    assert bar.done_vc == {0: 3, 1: 5, 2: 1} and bar.phase_vc == {} and bar.arrivals == []


def test_an_arrival_with_expected_bytes_is_one_action() -> None:
    # count 0: one completion check after both parts, not one after each
    bar = BarState("b", None, count=0)
    assert bar.signal(0, {0: 1}, 1)
    assert bar.completed == 1


def test_the_state_names_who_arrived_only_when_arrivals_give_names() -> None:
    named, anonymous = BarState("full", 1, 2), BarState("full", 1, 2)
    named.signal(0, {}, 1, "role `producer`")
    anonymous.signal(0, {}, 1)
    assert named.label == "`full[1]`" and BarState("x", None, 1).label == "`x`"
    assert "(by role `producer`)" in named.state_text()
    assert anonymous.state_text() == (
        "0 phase(s) completed; the current one has 1 of 2 arrivals, 0 transaction bytes outstanding"
    )


# -- clocks and boxes ---------------------------------------------------------------------------------


def test_join_takes_the_larger_clock_per_component() -> None:
    vc = {0: 2, 1: 5}
    join(vc, {1: 3, 2: 1})
    assert vc == {0: 2, 1: 5, 2: 1}


def test_boxes_overlap_contain_and_meet() -> None:
    a, b = ((0, 4), (0, 64)), ((2, 3), (32, 96))
    assert overlaps(a, b) and not overlaps(a, ((4, 5), (0, 64)))  # [lo, hi): touching is not sharing
    assert contains(a, ((1, 2), (0, 64))) and not contains(a, b)
    assert meet(a, b) == ((2, 3), (32, 64))


# -- groups and completion ----------------------------------------------------------------------------


def _transfer(comp: int, issuer: int = 0, group: str | None = "g") -> Transfer:
    return Transfer(comp, 1, {issuer: 1, comp: 1}, issuer, group)


def test_a_group_retires_all_but_the_pending_batches_oldest_first() -> None:
    g = Group()
    first, second, third = _transfer(10), _transfer(11), _transfer(12)
    g.open.append(first)
    g.commit()
    g.open += [second, third]
    g.commit()
    assert list(g.retire(1)) == [first] and len(g.committed) == 1
    assert list(g.retire(-1)) == [second, third] and not g.committed


class _Recording(Cta):
    def __init__(self) -> None:
        super().__init__()
        self.landings: list[tuple[int, int, int]] = []

    def landed(self, tr: Transfer, comp: int, clock: int) -> None:
        self.landings.append((tr.comp, comp, clock))


def test_a_finishing_instance_lands_its_groups_committed_first() -> None:
    cta = _Recording()
    a = RoleInstance(0)
    a.tick()
    done, committed, open_ = _transfer(10), _transfer(11), _transfer(12)
    done.done = True
    cta.inflight += [committed, open_]
    a.group("g").open.append(committed)
    a.group("g").commit()
    a.group("g").open.append(open_)
    a.group("h").open.append(done)
    cta.finish(a)
    assert a.state == DONE and a.vc[0] == 2
    assert cta.landings == [(11, 0, 2), (12, 0, 2)]  # the instance's accesses, at its exit
    assert cta.inflight == []


def test_a_transfer_that_signals_a_barrier_keeps_its_epoch_and_passes_it_on() -> None:
    cta = _Recording()
    a = RoleInstance(0, vc={0: 4})
    bar = BarState("full", 0, 1)
    bar.signal(64, {0: 4}, 1)
    tr = _transfer(7, group=None)
    tr.tx_barriers.append((bar, 64))
    cta.inflight.append(tr)
    assert cta.machine_transfers() == [tr]
    cta.land(a, tr, 5)
    assert cta.landings == [(7, 7, 1)] and cta.changed and bar.completed == 1
    assert a.vc == {0: 4, 7: 1}
    cta.complete(tr)  # landed once
    assert len(cta.landings) == 1


def test_a_cta_barrier_joins_every_clock() -> None:
    a, b = RoleInstance(0, vc={0: 3}, state=CTA), RoleInstance(1, vc={1: 2, 5: 1}, state=CTA)
    Cta().release_cta_barrier([a, b])
    assert a.vc == b.vc == {0: 3, 1: 2, 5: 1} and a.vc is not b.vc
    assert a.state == b.state == READY


# -- host arrays --------------------------------------------------------------------------------------


def test_host_arrays_are_copied_rounded_or_refused() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    kept = host_array("x", x, DType.F32, (2, 3))
    assert kept is not x and np.array_equal(kept, x)
    assert host_array("x", x, DType.BF16, (2, 3)).dtype == np.uint16
    assert host_array("i", np.arange(3), DType.I32, (3,)).dtype == np.int32
    with pytest.raises(CakeUserError, match="has shape"):
        host_array("x", x, DType.F32, (3, 2))
    with pytest.raises(CakeUserError, match="holds float32"):
        host_array("x", x, DType.I32, (2, 3))


def test_the_element_type_of_storage() -> None:
    assert element_dtype(np.dtype(np.uint16)) is DType.BF16
    assert element_dtype(np.dtype(np.float16)) is DType.F16
    assert element_dtype(np.dtype(np.bool_)) is None  # booleans are not taken for predicates
