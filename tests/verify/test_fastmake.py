"""`cake_core.ir.fastmake.maker` builds the very object the class's constructor builds, or is the constructor."""

from __future__ import annotations

import pickle

import attrs
import pytest

from cake_core.ir import nodes as n
from cake_core.ir.fastmake import maker
from cake_core.ir.location import Loc


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
