"""Fast construction of frozen attrs objects that are built by the thousand.

A frozen attrs class's ``__init__`` sets each field through ``object.__setattr__``; for the small
records the parser and the verifier build for every node, operand, effect and linear form, that is
most of what building one costs. :func:`maker` gives such a class a second constructor that fills
the instance's slots directly and returns the very same object (same class, fields, equality, hash
and repr) in well under half the time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

try:  # the same construction in C (cake_core/ir/_make.c), built at install where a C compiler was found
    from cake_core.ir._make import Maker as _CMaker
except ImportError:
    _CMaker = None

__all__ = ["maker"]


def maker(cls: type, fields: tuple[str, ...] | None = None) -> Callable[..., Any]:
    """A constructor ``make(*values)`` for the attrs class ``cls``, one value per name of ``fields``
    (every field the class's ``__init__`` takes, in any order; by default in declaration order, so
    ``make`` is called like the class), that fills the instance's slots directly.

    The maker builds the instance as a private subclass that adds nothing to ``cls`` but plain
    attribute setting (so each field is a direct slot store), then makes it a ``cls`` by
    ``__class__`` assignment, which Python allows between such layout-identical classes: what it
    returns is a ``cls`` like any other (the builder shows only in ``cls.__subclasses__()``).

    It runs none of the class's ``__init__`` logic, so a call must pass every field, defaults
    included (a field that ``__init__`` does not take, ``init=False``, is set to its default, which
    must be a plain value, not a factory), and values the class would convert must already be
    converted: the only converter allowed is ``tuple``, and the caller passes tuples.

    Where the C extension ``cake_core.ir._make`` was built, the maker is its ``Maker``: the same slot
    stores into a newly allocated ``cls``, without a Python frame or the class switch.

    The shortcut is taken only where that builds the very same object (checked here on a sample): a
    slotted attrs class whose slots are exactly its fields (no cached hash or other hidden slot),
    without validators, ``__attrs_pre_init__``/``__attrs_post_init__`` or ``on_setattr`` hooks. Any
    other class gets its own constructor, called with keywords.
    """
    declared = attrs.fields(cls)
    if fields is None:
        fields = tuple(f.name for f in declared if f.init)
    fixed = {f.name: f.default for f in declared if not f.init}  # set to their default by the maker

    def slow(*values: Any) -> Any:
        return cls(**{_alias(cls, k): v for k, v in zip(fields, values, strict=True)})

    if not _simple(cls, declared, fields, fixed):
        return slow
    if _CMaker is not None:
        made_c = _CMaker(cls, tuple(fields), tuple(fixed), tuple(fixed.values()))
        if _builds(made_c, cls, fields, fixed):
            return made_c  # type: ignore[no-any-return]
    # object's own attribute setting (both hooks of that slot: __setattr__ and __delattr__) and __init__,
    # so that `_builder()` is a bare instance and `o.name = value` a plain slot store
    builder = type(
        f"_Building{cls.__name__}",
        (cls,),
        {
            "__slots__": (),
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
            "__init__": object.__init__,
        },
    )
    args = ", ".join(fields)
    body = "".join(f"    o.{name} = {name}\n" for name in fields)
    body += "".join(f"    o.{name} = _fixed_{name}\n" for name in fixed)
    code = f"def make({args}):\n    o = _builder()\n{body}    o.__class__ = _cls\n    return o\n"
    namespace: dict[str, Any] = {"_builder": builder, "_cls": cls}
    namespace.update({f"_fixed_{name}": value for name, value in fixed.items()})
    exec(code, namespace)  # noqa: S102 - source built from attrs field names
    make = namespace["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make if _builds(make, cls, fields, fixed) else slow  # type: ignore[no-any-return]


def _builds(make: Callable[..., Any], cls: type, fields: tuple[str, ...], fixed: dict[str, Any]) -> bool:
    """Whether ``make`` builds a ``cls`` holding the values it is given, and the fixed defaults (tried on
    a sample)."""
    sample = tuple(range(len(fields)))
    try:
        made = make(*sample)
    except TypeError:  # a layout Python will not reassign (the Python maker's class switch)
        return False
    if type(made) is not cls or any(getattr(made, f) != v for f, v in zip(fields, sample)):
        return False
    return all(getattr(made, f) is v for f, v in fixed.items())


def _simple(cls: type, declared: Any, fields: tuple[str, ...], fixed: dict[str, Any]) -> bool:
    """Whether plain slot stores of ``fields`` (and ``fixed`` defaults) build a complete ``cls``."""
    if {f.name for f in declared if f.init} != set(fields) or len(fields) != len(set(fields)):
        return False
    if "__slots__" not in cls.__dict__:
        return False
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        return False
    if not all(f.validator is None and f.on_setattr is None and f.converter in (None, tuple) for f in declared):
        return False
    if any(isinstance(v, attrs.Factory) or v is attrs.NOTHING for v in fixed.values()):
        return False
    # every slot of the class and its bases is a field: no cached hash or other state __init__ would set
    slots = {s for k in cls.__mro__ for s in k.__dict__.get("__slots__", ()) if s != "__weakref__"}
    return slots == {f.name for f in declared}


def _alias(cls: type, name: str) -> str:
    """The keyword ``cls.__init__`` takes for field ``name`` (attrs strips a leading underscore)."""
    for f in attrs.fields(cls):
        if f.name == name:
            return getattr(f, "alias", None) or name.lstrip("_")
    return name
