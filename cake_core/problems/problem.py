"""The problem contract: what a kernel must compute, on which shapes, and how its answer is judged.

A problem plugin registers one object satisfying :class:`Problem` per problem. The object declares

- its tensors (:class:`TensorDecl`): name, role (input or output), the element types it may have and
  its shape as size names, e.g. ``x: [B, N, D]`` in ``{bf16, f16}``;
- its shape domain (:class:`SizeDecl` per size name): ``B >= 1``, ``D in {64, 128, 256}``;
- a default cell and the cells every candidate is checked on (:class:`Cell`: sizes plus element type);
- fresh random inputs (``make_inputs``), the work it does (``flops``, ``min_bytes``: what achieved
  FLOP/s and bytes/s are computed from), a numpy reference for small shapes (``reference``);
- its oracle (``check``), which judges a candidate's outputs on the same inputs and answers with an
  :class:`OracleReport`;
- optionally, its baseline (``baseline``: a :class:`Baseline` or None): the implementation every
  speed-up is reported against, timed in the same GPU worker as the candidates. The member is
  optional so that problems written before it still register; read it with :func:`baseline_of`.

Host arrays follow :mod:`cake_core.hostdata`: ``bf16`` is held as ``uint16`` bit patterns, ``f16`` as
``float16``, ``i32`` as ``int32``.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import numpy as np

from cake_core.errors import CakeUserError
from cake_core.hostdata import storage_dtype
from cake_core.ir.types import DTYPE_NAMES

if TYPE_CHECKING:
    from cake_core.runtime.worker import GpuRunner

#: The oracle computed its verdict with numpy in float64 on the host.
METHOD_NUMPY = "numpy-fp64"
#: The oracle computed its verdict with the problem's own naive float64 CUDA reference on a GPU.
METHOD_CUDA = "cuda-fp64-reference"
ORACLE_METHODS = (METHOD_NUMPY, METHOD_CUDA)

ROLES = ("input", "output")


def _dtype_names(values: Iterable[str]) -> tuple[str, ...]:
    out = tuple(values)
    if not out:
        raise ValueError("at least one element type is required")
    unknown = [v for v in out if v not in DTYPE_NAMES]
    if unknown:
        raise ValueError(f"unknown element types {unknown}")
    return out


@attrs.frozen
class SizeDecl:
    """One size name of a problem's shape domain.

    A size is an integer at least ``minimum``; where ``choices`` is non-empty it must also be one of them.
    """

    name: str
    minimum: int = 1
    choices: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    doc: str = ""

    def contains(self, value: int) -> bool:
        """Whether ``value`` lies in this size's domain."""
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            return False
        if value < self.minimum:
            return False
        return not self.choices or int(value) in self.choices

    def describe(self) -> str:
        """The domain as people write it: ``B >= 1`` or ``D in {64, 128, 256}``."""
        if self.choices:
            return f"{self.name} in {{{', '.join(str(c) for c in self.choices)}}}"
        return f"{self.name} >= {self.minimum}"


@attrs.frozen
class TensorDecl:
    """One tensor of a problem's signature.

    ``dtypes`` lists the element types the tensor may have. A tensor with one choice always has that
    type (an ``i32`` index output); a tensor with several takes the cell's element type, which must be
    one of them. ``shape`` names the sizes of each dimension, outermost first. An output that is not
    ``reproducible`` may differ by rounding between two runs on the same inputs (float sums by atomics,
    in arrival order): stage 3 does not compare it bit for bit, and its oracle judges both runs.
    """

    name: str
    role: str = attrs.field(validator=attrs.validators.in_(ROLES))
    dtypes: tuple[str, ...] = attrs.field(converter=_dtype_names)
    shape: tuple[str, ...] = attrs.field(converter=tuple)
    doc: str = ""
    reproducible: bool = True

    def dtype_for(self, dtype: str) -> str:
        """This tensor's element type in a cell whose element type is ``dtype``."""
        if len(self.dtypes) == 1:
            return self.dtypes[0]
        if dtype not in self.dtypes:
            raise CakeUserError(
                f"tensor `{self.name}` cannot hold `{dtype}` (choices: {', '.join(self.dtypes)})"
            )
        return dtype

    def shape_for(self, shape: Mapping[str, int]) -> tuple[int, ...]:
        """The concrete shape of this tensor at the sizes ``shape``."""
        try:
            return tuple(int(shape[s]) for s in self.shape)
        except KeyError as exc:
            raise CakeUserError(f"tensor `{self.name}` needs size `{exc.args[0]}`") from None

    def describe(self) -> str:
        """The declaration as people write it: ``x: [B, N, D] in {bf16, f16} (input)``."""
        types = self.dtypes[0] if len(self.dtypes) == 1 else "{" + ", ".join(self.dtypes) + "}"
        return f"{self.name}: [{', '.join(self.shape)}] in {types} ({self.role})"


def _freeze_sizes(value: Mapping[str, int] | Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple((str(k), int(v)) for k, v in items)


@attrs.frozen
class Cell:
    """One point of a problem's domain: concrete sizes and the element type of the inputs.

    ``sizes`` keeps the problem's size order (pass a mapping or ``(name, value)`` pairs); ``shape``
    gives them as a dict. Cells are hashable and compare by value.
    """

    sizes: tuple[tuple[str, int], ...] = attrs.field(converter=_freeze_sizes)
    dtype: str = attrs.field(validator=attrs.validators.in_(DTYPE_NAMES))
    note: str = ""

    @property
    def shape(self) -> dict[str, int]:
        return dict(self.sizes)

    @property
    def label(self) -> str:
        """``B=32 N=65536 K=1024 D=128 bf16``."""
        return " ".join(f"{k}={v}" for k, v in self.sizes) + f" {self.dtype}"

    def __str__(self) -> str:
        return self.label


@attrs.frozen
class Violation:
    """One output element the oracle rejected.

    ``position`` indexes the output tensor ``tensor``; ``got`` is the candidate's value and
    ``expected`` the reference's. ``excess`` is the element's error divided by its allowance (``> 1``
    for every violation; ``inf`` where no allowance applies: out of range, not finite, missing).
    ``detail`` says in words what is wrong, with the numbers behind the verdict.
    """

    tensor: str
    position: tuple[int, ...] = attrs.field(converter=tuple)
    got: float | int | None
    expected: float | int | None
    excess: float
    detail: str


@attrs.frozen
class OracleReport:
    """The oracle's verdict on a candidate's outputs.

    ``checked`` counts the output elements judged (an oracle judges every element, never a sample);
    ``violations`` counts those rejected; ``worst_excess`` is the largest ratio of an element's error to
    its allowance over every checked element (``<= 1`` everywhere means the outputs pass; ``inf`` for an
    element with no allowance). ``first`` holds the first few violations in row-major order. ``method``
    is one of :data:`ORACLE_METHODS`; ``tolerance`` states the acceptance rule in words.
    """

    passed: bool
    checked: int
    violations: int
    worst_excess: float
    first: tuple[Violation, ...] = attrs.field(converter=tuple)
    method: str = attrs.field(validator=attrs.validators.in_(ORACLE_METHODS))
    tolerance: str
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: the verdict, how many elements failed, the worst excess and the first failure."""
        verdict = "passed" if self.passed else "FAILED"
        line = (
            f"{verdict}: {self.violations} of {self.checked} elements violate "
            f"({self.tolerance}); worst excess {self.worst_excess:.3g} [{self.method}]"
        )
        if self.first:
            v = self.first[0]
            line += f"; first at {v.tensor}{list(v.position)}: {v.detail}"
        return line


def _module_names(values: Iterable[str]) -> tuple[str, ...]:
    out = tuple(values)
    bad = [v for v in out if not v.isidentifier()]
    if bad:
        raise ValueError(f"requirements must be top-level module names, not {bad}")
    return out


def _entry_spec(instance: object, attribute: attrs.Attribute, value: str) -> None:
    module, _, function = value.partition(":")
    if not module or not function or not all(p.isidentifier() for p in (*module.split("."), function)):
        raise ValueError(f"baseline entry `{value}` is not `package.module:function`")


@attrs.frozen
class Baseline:
    """The implementation a problem's speed-ups are measured against (its fastest known form).

    ``name`` labels its measurements (``baseline:NAME``); ``summary`` says in one line what is timed.
    ``entry`` (``package.module:function``) is imported lazily, in the GPU worker only, and called
    there as ``entry(inputs, outputs, shape, dtype)`` with the problem's tensors as CUDA
    ``torch.Tensor`` objects (inputs filled, outputs allocated; bf16 as ``torch.bfloat16``), the
    cell's sizes and element type. It does every untimed preparation (operands the baseline is
    given precomputed, autotuning) and returns the zero-argument callable that is timed: one call
    computes every output from the inputs on torch's current stream. ``requires`` names the
    top-level modules it imports (checked with :func:`importlib.util.find_spec`, nothing imported).
    """

    name: str
    summary: str
    entry: str = attrs.field(validator=_entry_spec)
    requires: tuple[str, ...] = attrs.field(default=(), converter=_module_names)

    def missing(self) -> tuple[str, ...]:
        """The modules of ``requires`` that cannot be found here (empty when all can)."""
        return tuple(m for m in self.requires if importlib.util.find_spec(m) is None)


@runtime_checkable
class Problem(Protocol):
    """What a problem plugin registers (see the module documentation for the meaning of each member).

    A problem may also have ``baseline`` (a :class:`Baseline` or None). It is not a member of the
    protocol, so that problems written before it still register; read it with :func:`baseline_of`.
    """

    #: the id users pass to ``cake run`` and ``--problem``
    name: str
    #: one line: what the problem computes
    summary: str
    #: the element types a cell may have (the inputs' types)
    dtypes: tuple[str, ...]
    #: the shape domain, one declaration per size name
    sizes: tuple[SizeDecl, ...]
    #: inputs then outputs
    tensors: tuple[TensorDecl, ...]
    #: the cell candidates are tuned and reported on
    default_cell: Cell
    #: the cells every candidate must pass (the default cell among them)
    cells: tuple[Cell, ...]

    def make_inputs(self, shape: Mapping[str, int], dtype: str, seed: int) -> dict[str, np.ndarray]:
        """Fresh random inputs (storage arrays, never all zeros), the same for the same seed."""
        ...

    def flops(self, shape: Mapping[str, int]) -> int:
        """Floating-point operations of the problem at ``shape`` (what achieved FLOP/s counts)."""
        ...

    def min_bytes(self, shape: Mapping[str, int], dtype: str) -> int:
        """Bytes any implementation must move to or from global memory (inputs read, outputs written once)."""
        ...

    def reference(
        self, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str
    ) -> dict[str, np.ndarray]:
        """The outputs computed with numpy (meant for small shapes)."""
        ...

    def check(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
        shape: Mapping[str, int],
        dtype: str,
        *,
        runner: GpuRunner | None = None,
    ) -> OracleReport:
        """Judge every output element against the problem's oracle.

        ``runner`` is a live GPU worker the oracle may use for a CUDA reference at large shapes.
        """
        ...


# ---------------------------------------------------------------------------------------------------
# Helpers every problem can use
# ---------------------------------------------------------------------------------------------------


def baseline_of(problem: Problem) -> Baseline | None:
    """The problem's :class:`Baseline`, or None where it names none (or predates the member).

    Raises :class:`CakeUserError` (a fault of the plugin that registered the problem, not of Cake)
    when ``baseline`` holds anything but a Baseline or None.
    """
    value = getattr(problem, "baseline", None)
    if value is not None and not isinstance(value, Baseline):
        raise CakeUserError(
            f"the plugin of problem `{problem.name}` gives it a `baseline` of type {type(value).__name__}; "
            "a cake_core.problems.problem.Baseline or None is expected"
        )
    return value


def validate_cell(problem: Problem, shape: Mapping[str, int], dtype: str) -> dict[str, int]:
    """``shape`` as a plain dict after checking it and ``dtype`` against the problem's domain.

    Raises :class:`CakeUserError` naming the first size (or the element type) outside the domain.
    """
    if dtype not in problem.dtypes:
        raise CakeUserError(
            f"problem `{problem.name}` takes element types {', '.join(problem.dtypes)}, not `{dtype}`"
        )
    names = [s.name for s in problem.sizes]
    extra = sorted(set(shape) - set(names))
    if extra:
        raise CakeUserError(f"problem `{problem.name}` has no size `{extra[0]}` (sizes: {', '.join(names)})")
    out: dict[str, int] = {}
    for size in problem.sizes:
        if size.name not in shape:
            raise CakeUserError(f"problem `{problem.name}` needs size `{size.name}` ({size.describe()})")
        value = shape[size.name]
        if not size.contains(value):
            raise CakeUserError(
                f"size {size.name}={value!r} is outside the domain of `{problem.name}` ({size.describe()})"
            )
        out[size.name] = int(value)
    return out


def inputs_of(problem: Problem) -> tuple[TensorDecl, ...]:
    return tuple(t for t in problem.tensors if t.role == "input")


def outputs_of(problem: Problem) -> tuple[TensorDecl, ...]:
    return tuple(t for t in problem.tensors if t.role == "output")


def structural_violations(
    decls: Iterable[TensorDecl],
    arrays: Mapping[str, Any],
    shape: Mapping[str, int],
    dtype: str,
) -> list[Violation]:
    """Violations for tensors that are missing or have the wrong shape or storage type.

    An oracle calls this first: no element of a malformed tensor can be judged.
    """
    found: list[Violation] = []
    for decl in decls:
        want_shape = decl.shape_for(shape)
        want_dtype = storage_dtype(decl.dtype_for(dtype))
        arr = arrays.get(decl.name)
        if arr is None:
            problem = "is missing"
        elif not isinstance(arr, np.ndarray):
            problem = f"is a {type(arr).__name__}, not a numpy array"
        elif tuple(arr.shape) != want_shape:
            problem = f"has shape {list(arr.shape)}, expected {list(want_shape)}"
        elif arr.dtype != want_dtype:
            problem = f"is stored as {arr.dtype}, expected {want_dtype}"
        else:
            continue
        found.append(Violation(decl.name, (), None, None, math.inf, f"tensor `{decl.name}` {problem}"))
    return found



def require_valid_inputs(problem: Problem, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int], dtype: str) -> None:
    """Raise :class:`~cake_core.errors.CakeUserError` naming the first structural violation (a missing tensor, a
    wrong shape or dtype) of ``inputs`` for ``problem`` at the cell."""
    bad = structural_violations(inputs_of(problem), inputs, shape, dtype)
    if bad:
        raise CakeUserError(f"inputs of `{problem.name}` at {dict(shape)} {dtype}: {bad[0].detail}")

def failed_report(
    violations: list[Violation], checked: int, method: str, tolerance: str, seconds: float = 0.0
) -> OracleReport:
    """A failing report for violations found before any element could be judged."""
    return OracleReport(
        passed=False,
        checked=checked,
        violations=max(len(violations), 1),
        worst_excess=math.inf,
        first=tuple(violations[:8]),
        method=method,
        tolerance=tolerance,
        seconds=seconds,
    )


class SameInputs:
    """A problem whose inputs for each (shape, dtype, seed) are made once and kept, read-only: every candidate
    of a run (and the baseline) is checked and timed on the same data, and the reference cell's 512 MiB of
    points are drawn once per seed, not once per candidate. It keeps one shape's inputs at a time.

    Given a GPU runner (:meth:`keep_in`), it also has the runner keep every input set it makes
    (:meth:`GpuRunner.keep <cake_core.runtime.worker.GpuRunner.keep>`): the arrays cross to the worker once,
    not with every run of every candidate (and of the oracle, which takes the same arrays)."""

    def __init__(self, problem: Problem) -> None:
        self._problem = problem
        self._made: dict[tuple[Any, ...], dict[str, np.ndarray]] = {}
        self._runner: Any = None

    def keep_in(self, runner: Any) -> None:
        """Have ``runner`` keep the input sets made so far and every one made from now on."""
        self._runner = runner
        for made in self._made.values():
            runner.keep(made)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._problem, name)

    def make_inputs(self, shape: Mapping[str, int], dtype: str, seed: int) -> dict[str, np.ndarray]:
        key = (tuple(sorted(shape.items())), dtype, seed)
        if key not in self._made:
            if self._made and next(iter(self._made))[:2] != key[:2]:
                self._made.clear()  # a new shape: the last one's arrays go
            made = self._problem.make_inputs(shape, dtype, seed)
            for arr in made.values():
                arr.flags.writeable = False  # shared by every run on this cell: nobody may change them
            self._made[key] = made
            if self._runner is not None:
                self._runner.keep(made)
        return self._made[key]
