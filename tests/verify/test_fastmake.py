"""`cake_core.ir.fastmake.maker` builds the very object the class's constructor builds, or is the constructor;
with the C maker (cake_core/ir/_make.c) where it was built and with the Python one alike."""

from __future__ import annotations

import gc
import pickle
import weakref

import attrs
import pytest

from cake_core.ir import fastmake
from cake_core.ir import nodes as n
from cake_core.ir.fastmake import maker
from cake_core.ir.location import Loc
from cake_core.verify.symbolic import Lin


@attrs.frozen
class Plain:
    a: int
    b: tuple = attrs.field(converter=tuple)
    c: str = "x"


@attrs.frozen
class Checked:
    a: int = attrs.field(validator=attrs.validators.instance_of(int))


@attrs.frozen(cache_hash=True)
class Cached:
    a: int


@pytest.fixture(autouse=True, params=["c", "python"])
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the C maker (skipped where it was not built) and with the Python one."""
    if request.param == "c" and fastmake._CMaker is None:
        pytest.skip("the C maker was not built (no C compiler at install)")
    if request.param == "python":
        monkeypatch.setattr(fastmake, "_CMaker", None)
    return request.param


def test_a_made_object_is_the_object_the_class_makes() -> None:
    make = maker(Plain)
    made, built = make(1, (2, 3), "y"), Plain(1, (2, 3), "y")
    assert type(made) is Plain
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert pickle.loads(pickle.dumps(made)) == built
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.a = 5  # type: ignore[misc]


def test_fields_may_be_given_in_another_order() -> None:
    assert maker(Plain, ("c", "a", "b"))("z", 1, ()) == Plain(1, (), "z")


@pytest.mark.parametrize("cls", [Checked, Cached])
def test_a_class_the_shortcut_would_change_gets_its_own_constructor(cls: type) -> None:
    make = maker(cls)
    assert make(1) == cls(1)
    if cls is Checked:
        with pytest.raises(TypeError):
            make("not an int")


def test_the_parser_builds_nodes_as_their_classes() -> None:
    loc = maker(Loc, ("file", "line", "col", "end_line", "end_col"))("f", 1, 2, 1, 3)
    assert type(loc) is Loc and loc == Loc("f", 1, 2, 1, 3)
    name = maker(n.Name, tuple(f.name for f in attrs.fields(n.Name)))
    assert type(name("x", loc)) is n.Name


def test_a_field_set_to_its_default_by_the_maker_is_set() -> None:
    # Lin's cached key is not an __init__ argument: the maker stores its default
    lin = maker(Lin, ("const", "terms"))(3, ())
    assert lin._key is None  # computed on first use (equality uses it)
    assert lin == Lin(3, ()) and lin.key == "3"


def test_the_maker_that_is_used(implementation: str) -> None:
    make = maker(Plain)
    assert (type(make).__name__ == "Maker") == (implementation == "c")


def test_a_made_object_is_freed_when_dropped() -> None:
    made = maker(Plain)(1, (), "y")
    gone = weakref.ref(made)
    del made
    gc.collect()
    assert gone() is None


def test_a_call_with_the_wrong_arguments_is_refused() -> None:
    make = maker(Plain)
    with pytest.raises(TypeError):
        make(1, ())
    with pytest.raises(TypeError):
        make(1, (), "y", a=2)


def test_the_c_maker_takes_only_writable_object_slots(implementation: str) -> None:
    if implementation != "c":
        pytest.skip("about the C maker")
    assert fastmake._CMaker is not None
    with pytest.raises(TypeError):
        fastmake._CMaker(Plain, ("a", "nope"))
    with pytest.raises(TypeError):
        fastmake._CMaker(Plain, ("a", "__init__"))
