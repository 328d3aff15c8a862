"""Open names (``cake_core.names``): one object per name and class, equal to the plain string."""

from __future__ import annotations

import pickle

import pytest
from cake_core.ir.primitive import Kind, Slot
from cake_core.target import Feature


def test_one_object_per_name() -> None:
    assert Feature("tma") is Feature.TMA and Kind("shared") is Kind.SHARED
    assert Feature("a-feature-the-core-never-heard-of") is Feature("a-feature-the-core-never-heard-of")


def test_equal_to_and_hashed_like_the_plain_string() -> None:
    assert Feature.TMA == "tma" and hash(Feature.TMA) == hash("tma")
    assert "tma" in frozenset({Feature.TMA}) and Feature.TMA in {"tma"}
    assert f"{Kind.GLOBAL}" == "global" and Kind.GLOBAL.value == "global" and type(Kind.GLOBAL.value) is str
    assert sorted([Feature.WGMMA, Feature.FP8, Feature.TMA]) == ["fp8", "tma", "wgmma"]


def test_each_class_has_its_own_names() -> None:
    assert Kind("tmem") == Feature("tmem") and Kind("tmem") is not Feature("tmem")
    assert type(Kind("tmem")) is Kind and type(Feature("tmem")) is Feature
    assert repr(Kind.SHARED) == "Kind('shared')" and repr(Feature.TMA) == "Feature('tma')"


def test_a_round_trip_through_pickle_keeps_identity() -> None:
    assert pickle.loads(pickle.dumps(Feature.TMA)) is Feature.TMA
    assert pickle.loads(pickle.dumps(frozenset({Kind.SHARED}))) == {Kind.SHARED}


@pytest.mark.parametrize("bad", ["", None, 3])
def test_a_name_is_a_non_empty_string(bad: object) -> None:
    with pytest.raises(ValueError, match="is named by a non-empty string"):
        Feature(bad)  # type: ignore[arg-type]


def test_a_slot_converts_plain_strings_to_the_kinds() -> None:
    slot = Slot("dst", ["shared", "registers"])
    assert {id(k) for k in slot.kinds} == {id(Kind.SHARED), id(Kind.REGISTERS)}
