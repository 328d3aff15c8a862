"""The core's own diagnostic codes (prefix ``CK``): syntax, names and types.

Verifier rules bring their own codes and documentation; these are the ones the parser and the type
checker emit before any rule runs. Each explanation follows ruff's shape: what it checks, why, an
example, and what to write instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity
from cake_core.location import Loc

if TYPE_CHECKING:
    from cake_core.ir import nodes as n


@attrs.frozen
class Code:
    code: str
    slug: str
    severity: Severity
    summary: str
    explanation: str

    def at(
        self,
        loc: Loc,
        message: str,
        *,
        label: str = "",
        secondary: tuple[Label, ...] = (),
        notes: tuple[str, ...] = (),
        help: str | None = None,
        plugin: str = "cake-core",
    ) -> Diagnostic:
        return Diagnostic(
            self.code, self.slug, self.severity, message, loc, label, secondary, notes, help, plugin
        )


def _code(code: str, slug: str, summary: str, explanation: str) -> Code:
    return Code(code, slug, Severity.ERROR, summary, explanation.strip())


SYNTAX = _code("CK001", "syntax-error", "the text is not Cake IR", """
## What it checks
That the file follows the grammar of Cake IR: kernels and programs, their declarations, indented
blocks, and operations in the generic form `name outs <- ins, key=value`.

## Why
Nothing else can run on text that does not parse.

## Example
    role main warps 0..8       # missing `:` at the end of the header

## Use instead
    role main warps 0..8:
""")

UNKNOWN_NAME = _code("CK002", "unknown-name", "a name that nothing declares", """
## What it checks
Every name used in an expression or operand is a parameter, a size of the shape domain, a constant,
a grid variable, a loop variable, a `let`, a buffer, a barrier, a register tile, or `self`.

## Why
A misspelt name would otherwise reach the lowering as undefined C++.

## Example
    cp.async xs <- x[b, t*BM : +BM, :]     # `BM` never declared

## Use instead
    const BM = 128
""")

DUPLICATE_NAME = _code("CK003", "duplicate-name", "a name declared twice in one scope", """
## What it checks
No two declarations in one kernel (parameters, constants, buffers, barriers, roles, register tiles,
loop variables, lets) share a name, no kernel or program name repeats in a module, and no declaration
takes a built-in word (`inf`, which every evaluator reads as infinity).

## Why
Shadowing in a schedule is almost always a mistake, and the lowering maps names one-to-one to C++.

## Example
    const BM = 128
    const BM = 64

## Use instead
Give each declaration its own name.
""")

UNKNOWN_PRIMITIVE = _code("CK004", "unknown-primitive", "an operation no loaded plugin provides", """
## What it checks
Every operation name is registered as a primitive by the core or a loaded plugin.

## Why
The operation has no type rule, semantics or lowering without its primitive.

## Example
    mma.synk acc <- a, b

## Use instead
    mma.sync acc <- a, b         # or install the plugin package that provides the primitive
""")

OPERANDS = _code("CK005", "bad-operands", "operands of the wrong number or kind", """
## What it checks
An operation's operands match its primitive's signature: how many outputs and inputs, and which
memory tier each lives in (a global tensor, a shared buffer, a register tile, a barrier, a value).

## Why
The primitive's semantics and lowering assume its signature.

## Example
    cp.async x[b, 0 : +64, :] <- xs       # cp.async copies global -> shared, not back

## Use instead
    cp.async xs <- x[b, 0 : +64, :]
""")

TYPES = _code("CK006", "type-mismatch", "element types or shapes that do not agree", """
## What it checks
The element types and tile shapes of an operation's operands agree with its primitive's type rule
(a copy moves equal shapes of one dtype; an MMA multiplies [M, K] by [N, K]^T into [M, N]).

## Why
A mismatch is either a silent conversion or memory read out of its bounds.

## Example
    reg acc: f32[128, 64] layout mma_acc(4, 2)
    mma.sync acc <- a, b          # b holds 128 columns

## Use instead
Make the tile shapes agree.
""")

ATTRIBUTES = _code("CK007", "bad-attribute", "an attribute the primitive does not take, or a missing one", """
## What it checks
Attributes (`key=value`) are among those the primitive declares, required ones are present, and
each value is of the declared kind.

## Why
An attribute nobody reads is usually a misspelling of one that matters (`oob=zero`).

## Example
    cp.async xs <- x[b, r : +64, :], oob=zeros

## Use instead
    cp.async xs <- x[b, r : +64, :], oob=zero
""")

DOMAIN = _code("CK008", "bad-domain", "a shape domain or constant that cannot be used", """
## What it checks
Domain clauses name sizes or type variables used by the parameters; finite sets are non-empty;
constants and every expression that must be known when the kernel is compiled (shapes of buffers
and register tiles, warp counts, stage counts) depend only on constants and finite-set sizes.

## Why
Buffers are sized when the kernel is compiled; a size known only at launch cannot size them.

## Example
    smem xs: bf16[BM, N]        # N is a run-time size

## Use instead
    smem xs: bf16[BM, D]        # with `domain D in {64, 128}`
""")

LAUNCH = _code("CK009", "bad-launch", "a program launch that does not match its kernel", """
## What it checks
A program launches kernels of its module with as many arguments as each kernel has parameters,
each argument a program parameter or buffer of the same element type and rank.

## Why
The launcher passes arguments by position.

## Example
    launch assign(x, c, out)        # assign takes (x, c, c_sq, out)

## Use instead
    launch assign(x, c, c_sq, out)
""")

LAYOUT = _code("CK010", "bad-layout", "a register layout that does not exist or does not fit", """
## What it checks
A register tile's layout is one the core knows, its arguments fit the role's warps (a warp grid of
`mma_acc(WM, WN)` multiplies to the role's warps per instance; `wgmma_acc` and `wgmma_rows` belong to
one warpgroup, an instance of 4 warps), and the tile divides into the layout's fragments. Where
another instance size (`per`) that splits the role's warps would make the tile fit, the help says
which.

## Why
The fragment layout decides which thread holds which element; a wrong one cannot be lowered.

## Example
    reg acc: f32[128, 128] layout mma_acc(4, 4)     # role has 8 warps
    role consumers warps 4..12:                     # one instance of 8 warps
      reg acc: f32[128, 128] layout wgmma_acc       # a warpgroup's accumulator: 4 warps

## Use instead
    reg acc: f32[128, 128] layout mma_acc(4, 2)
    role consumers warps 4..12 per 4:               # two warpgroups; `self` numbers them
      reg acc: f32[128, 128] layout wgmma_acc
""")

PIPE = _code("CK011", "bad-pipe", "a pipe declared or used in a way its derived barriers cannot follow", """
## What it checks
A `pipe` names existing roles and shared buffers; its buffers are rings of one stage count and belong
to no other pipe; one producer role of one instance fills it (it may also be a consumer: a one-role
kernel fills its own ring). `pipe.acquire` runs in the producer role, `pipe.wait` and `pipe.release` in a consumer role; the
copies into an acquired stage are issued in the acquire's block, with boxes of compile-time size, so
that the bytes the stage expects are known when the kernel is compiled.

## Why
The compiler derives a pipe's barriers, its stage indices, phase parities, arrival counts and the
bytes each stage expects from the declaration and the operations. Each rule above is what that
derivation assumes; a pipe outside them would get numbers that are wrong, so it is refused.

## Example
    smem xs: bf16[2][128, 64]
    smem cs: bf16[3][128, 64]
    pipe ring: producer -> consumers of xs, cs     # 2 stages and 3 stages

## Use instead
    pipe xring: producer -> consumers of xs
    pipe cring: producer -> consumers of cs
""")

def per_fix(role: n.Role, warps: int, per: int, size: int) -> dict[str, Any]:
    """The secondary span and help of a :data:`LAYOUT` finding that instances of ``size`` warps would
    fix, for ``role`` (``warps`` warps in instances of ``per``): keyword arguments of :meth:`Code.at`."""
    now = f"one instance of {per} warps" if per == warps else f"instances of {per} warps"
    split = f"{warps // size} instance{'s' if warps // size > 1 else ''} of {size} warps"
    edit = f"write `per {size}` after its warp range" if role.per is None else f"write `per {size}`, not `per {per}`"
    return {
        "secondary": (Label(role.loc, f"role `{role.name}` is {now}"),),
        "help": f"split role `{role.name}` into {split}: {edit} (`self` numbers the instances; each holds "
        "its own tile)",
    }


CORE_CODES: dict[str, Code] = {
    c.code: c
    for c in (SYNTAX, UNKNOWN_NAME, DUPLICATE_NAME, UNKNOWN_PRIMITIVE, OPERANDS, TYPES, ATTRIBUTES,
              DOMAIN, LAUNCH, LAYOUT, PIPE)
}  # fmt: skip
