"""Recursive-descent parser for ``.cake`` text. Every node keeps the span it was parsed from.

The grammar knows declarations and control flow; operations are all parsed in one generic form,
``name outs <- ins, key=value, ...``, so a primitive from a plugin needs no change here.

The parser reads the lexer's scanned tokens (:func:`cake_core.ir.lexer.scan`): it matches on each
token's text, and makes a source location only where a node or a diagnostic keeps one.
"""

from __future__ import annotations

from pathlib import Path

from cake_core.diagnostics.codes import SYNTAX
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n
from cake_core.ir.lexer import DEDENT, EOF, INDENT, NEWLINE, describe, scan
from cake_core.ir.swizzle import SWIZZLES
from cake_core.location import Loc

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")
KEYWORDS = frozenset(
    "kernel program domain const grid over cta smem barrier role for in if else let reg layout "
    "launch buffer warps per regs step and or not global scalar occupancy cluster swizzle pad "
    "align count mbarrier".split()
)
#: words an operation takes as bare flags after its operands (`tma.load ..., multicast`,
#: `mbarrier.arrive cempty[s], cluster`): the attribute of that name, its value the word itself
FLAGS = frozenset({"multicast", "cluster"})
# binding levels of the expression grammar, loosest first (`not` is a prefix between `and` and comparisons)
_OR, _AND, _NOT, _CMP, _ADD, _MUL = range(1, 7)
_BINARY = {
    "or": _OR, "and": _AND, "<": _CMP, "<=": _CMP, ">": _CMP, ">=": _CMP, "==": _CMP, "!=": _CMP,
    "+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL, "%": _MUL,
}  # fmt: skip


class Parser:
    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.toks, self.lines, self.cols, self.ends = scan(text, file)
        self.i = 0

    # -- token helpers -------------------------------------------------------------------------------

    def what(self, i: int | None = None) -> str:
        """The current (or ``i``-th) token in words, for messages."""
        return describe(self.toks[self.i if i is None else i])

    def loc(self, i: int) -> Loc:
        line = self.lines[i]
        return Loc(self.file, line, self.cols[i], line, self.ends[i])  # type: ignore[return-value]

    def at(self, text: str) -> bool:
        return self.toks[self.i] == text

    def accept(self, text: str) -> bool:
        if self.toks[self.i] == text:
            self.i += 1
            return True
        return False

    def error(self, message: str, at: int | None = None, help: str | None = None) -> DiagnosticError:
        return DiagnosticError([SYNTAX.at(self.loc(self.i if at is None else at), message, label="here", help=help)])

    def expect(self, text: str, context: str = "") -> int:
        """Consume the token ``text`` and return its index; a syntax error when it is not next."""
        if self.toks[self.i] != text:
            where = f" {context}" if context else ""
            raise self.error(f"expected `{text}`{where}, found {self.what()}")
        self.i += 1
        return self.i - 1

    def indent(self, what: str) -> None:
        if self.toks[self.i] != INDENT:
            raise self.error(f"expected {what}, found {self.what()}")
        self.i += 1

    def ident(self, what: str = "a name") -> str:
        t = self.toks[self.i]
        if t[0] not in _NAME_START or t in KEYWORDS or "." in t:
            raise self.error(f"expected {what}, found {describe(t)}")
        self.i += 1
        return t

    def newline(self, context: str) -> None:
        if self.toks[self.i] != NEWLINE:
            raise self.error(f"expected end of line {context}, found {self.what()}")
        self.i += 1

    def span(self, start: int) -> Loc:
        """From the start of token ``start`` to the end of the last token consumed."""
        lines, end = self.lines, self.i - 1
        return Loc(self.file, lines[start], self.cols[start], lines[end], self.ends[end])  # type: ignore[return-value]

    # -- module --------------------------------------------------------------------------------------

    def module(self) -> n.Module:
        kernels: list[n.Kernel] = []
        program: n.Program | None = None
        while self.toks[self.i] != EOF:
            if self.toks[self.i] == NEWLINE:
                self.i += 1
            elif self.at("kernel"):
                kernels.append(self.kernel())
            elif self.at("program"):
                if program is not None:
                    raise self.error("a module has at most one `program`")
                program = self.program()
            else:
                raise self.error(f"expected `kernel` or `program`, found {self.what()}")
        if not kernels:
            raise DiagnosticError(
                [SYNTAX.at(self.loc(self.i), "a module needs at least one `kernel`", label="file ends here")]
            )
        return n.Module(tuple(kernels), program, self.file)

    def params(self) -> tuple[n.Param, ...]:
        self.expect("(", "before the parameters")
        params = []
        while not self.at(")"):
            start = self.i
            name = self.ident("a parameter name")
            self.expect(":", "after the parameter name")
            if self.accept("global"):
                dtype = self.ident("an element type")
                self.expect("[", "before the parameter's shape")
                shape = self.expr_list("]")
                params.append(n.Param(name, "global", dtype, shape, loc=self.span(start)))
            elif self.accept("scalar"):
                dtype = self.ident("an element type")
                params.append(n.Param(name, "scalar", dtype, (), loc=self.span(start)))
            else:
                raise self.error(f"expected `global` or `scalar`, found {self.what()}")
            if not self.accept(","):
                break
        self.expect(")", "after the parameters")
        return tuple(params)

    def domain(self) -> list[n.Constraint]:
        self.expect("domain")
        out = []
        while True:
            start = self.i
            var = self.ident("a size or type variable")
            if self.accept("in"):
                self.expect("{", "before the set of values")
                values = self.expr_list("}")
                out.append(n.Constraint(var, "in", values, loc=self.span(start)))
            elif self.at(">=") or self.at("<="):
                op = self.toks[self.i]
                self.i += 1
                out.append(n.Constraint(var, op, (self.expr(),), loc=self.span(start)))
            elif self.accept("%"):
                m = self.expr(_ADD)
                self.expect("==", "in a divisibility clause (`N % 8 == 0`)")
                zero = self.toks[self.i]
                if zero[0] not in _DIGITS or zero[-1] == "B":
                    raise self.error(f"expected `0`, found {describe(zero)}")
                if zero != "0":
                    raise self.error("a divisibility clause ends in `== 0`")
                self.i += 1
                out.append(n.Constraint(var, "%", (m,), loc=self.span(start)))
            else:
                raise self.error(
                    f"expected `in`, `>=`, `<=` or `%` in a domain clause, found {self.what()}",
                    help="e.g. `domain B >= 1, N % 8 == 0, D in {64, 128}`",
                )
            if not self.accept(","):
                break
        return out

    def program(self) -> n.Program:
        start = self.expect("program")
        name = self.ident("a program name")
        params = self.params()
        self.newline("after the program header")
        self.indent("an indented program body")
        domain: list[n.Constraint] = []
        buffers, launches = [], []
        while self.toks[self.i] != DEDENT:
            s = self.i
            if self.at("domain"):
                domain += self.domain()
            elif self.accept("buffer"):
                bname = self.ident("a buffer name")
                self.expect(":")
                self.expect("global", "(program buffers live in global memory)")
                dtype = self.ident("an element type")
                self.expect("[")
                shape = self.expr_list("]")
                buffers.append(n.Buffer(bname, dtype, shape, loc=self.span(s)))
            elif self.accept("launch"):
                kname = self.ident("a kernel name")
                self.expect("(")
                args = []
                while not self.at(")"):
                    args.append(self.ident("an argument name"))
                    if not self.accept(","):
                        break
                self.expect(")")
                launches.append(n.Launch(kname, tuple(args), loc=self.span(s)))
            else:
                raise self.error(f"expected `domain`, `buffer` or `launch`, found {self.what()}")
            self.newline("after a program item")
        self.i += 1
        return n.Program(name, params, tuple(domain), tuple(buffers), tuple(launches), loc=self.loc(start))

    # -- kernel --------------------------------------------------------------------------------------

    def kernel(self) -> n.Kernel:
        start = self.expect("kernel")
        name = self.ident("a kernel name")
        params = self.params()
        self.newline("after the kernel header")
        self.indent("an indented kernel body")
        domain: list[n.Constraint] = []
        consts: list[n.Const] = []
        grid = cta = None
        smem: list[n.Smem] = []
        barriers: list[n.Barrier] = []
        pipes: list[n.Pipe] = []
        roles: list[n.Role] = []
        mems: list[n.Mem] = []
        toks = self.toks
        while toks[self.i] != DEDENT:
            s = self.i
            key = toks[s]
            if key == "domain":
                domain += self.domain()
                self.newline("after the domain")
            elif key == "const":
                self.i += 1
                while True:
                    cs = self.i
                    cname = self.ident("a constant name")
                    self.expect("=")
                    consts.append(n.Const(cname, self.expr(), loc=self.span(cs)))
                    if not self.accept(","):
                        break
                self.newline("after the constants")
            elif key == "grid":
                self.i += 1
                if grid is not None:
                    raise self.error("a kernel has one `grid`", s)
                self.expect("(")
                gvars = []
                while not self.at(")"):
                    gvars.append(self.ident("a grid variable"))
                    if not self.accept(","):
                        break
                self.expect(")")
                self.expect("over")
                self.expect("(")
                extents = self.expr_list(")")
                grid = n.Grid(tuple(gvars), extents, loc=self.span(s))
                self.newline("after the grid")
            elif key == "cta":
                self.i += 1
                if cta is not None:
                    raise self.error("a kernel has one `cta` line", s)
                self.expect("warps")
                warps = self.expr()
                occupancy = self.expr() if self.accept("occupancy") else None
                cluster: tuple[n.Expr, ...] = ()
                if self.accept("cluster"):
                    self.expect("(")
                    cluster = self.expr_list(")")
                cta = n.Cta(warps, occupancy, cluster, loc=self.span(s))
                self.newline("after the cta line")
            elif key == "smem":
                self.i += 1
                smem.append(self.smem(s))
                self.newline("after the buffer")
            elif key == "barrier":
                self.i += 1
                bname = self.ident("a barrier name")
                self.expect(":")
                kind = self.toks[self.expect("mbarrier", "(the barrier kind)")]
                stages = None
                if self.accept("["):
                    stages = self.expr()
                    self.expect("]")
                self.expect("count", "(arrivals per phase)")
                barriers.append(n.Barrier(bname, kind, self.expr(), stages, loc=self.span(s)))
                self.newline("after the barrier")
            elif key == "pipe":
                self.i += 1
                pipes.append(self.pipe(s))
                self.newline("after the pipe")
            elif key == "role":
                roles.append(self.role())
            elif key[0] in _NAME_START and key not in KEYWORDS and "." not in key and toks[s + 2] == ":":
                mems.append(self.mem(s))
                self.newline("after the declaration")
            else:
                raise self.error(
                    f"expected a kernel item (`domain`, `const`, `grid`, `cta`, `smem`, `barrier`, "
                    f"`pipe`, `role`, or a plugin tier's declaration such as `tmem acc: f32[128, 128]`), "
                    f"found {self.what()}"
                )
        self.i += 1
        if grid is None:
            raise DiagnosticError([SYNTAX.at(self.loc(start), f"kernel `{name}` has no `grid` line")])
        if cta is None:
            raise DiagnosticError([SYNTAX.at(self.loc(start), f"kernel `{name}` has no `cta` line")])
        if not roles:
            raise DiagnosticError([SYNTAX.at(self.loc(start), f"kernel `{name}` has no `role`")])
        return n.Kernel(
            name, params, tuple(domain), tuple(consts), grid, cta, tuple(smem), tuple(barriers),
            tuple(roles), loc=self.loc(start), pipes=tuple(pipes), mems=tuple(mems),
        )  # fmt: skip

    def pipe(self, start: int) -> n.Pipe:
        """``pipe cring: producer -> consumers of cs, csq`` (after the keyword)."""
        name = self.ident("a pipe name")
        self.expect(":")
        producers = self.names("a producer role")
        self.expect("->", "between the producer and consumer roles (`producer -> consumers`)")
        consumers = self.names("a consumer role")
        self.expect("of", "before the pipe's buffers (`of cs, csq`)")
        buffers = self.names("a shared buffer")
        cluster = self.accept("cluster")
        return n.Pipe(name, producers, consumers, buffers, bool(cluster), loc=self.span(start))

    def names(self, what: str) -> tuple[str, ...]:
        """One or more comma-separated names."""
        out = [self.ident(what)]
        while self.accept(","):
            out.append(self.ident(what))
        return tuple(out)

    def mem(self, start: int) -> n.Mem:
        """``tmem acc: f32[2][128, 128]``: a region of the plugin tier the first word names. Parsed
        alike for every tier; whether the tier exists is the type checker's question."""
        tier = self.ident("a memory tier")
        name, dtype, stages, shape = self.staged_decl("a region name")
        return n.Mem(tier, name, dtype, shape, stages, loc=self.span(start))

    def staged_decl(self, what: str) -> tuple[str, str, n.Expr | None, tuple[n.Expr, ...]]:
        """``NAME: DTYPE[stages][extents]`` or ``NAME: DTYPE[extents]``: name, dtype, stages, extents."""
        name = self.ident(what)
        self.expect(":")
        dtype = self.ident("an element type")
        self.expect("[")
        first = self.expr_list("]")
        stages = None
        if self.accept("["):
            if len(first) != 1:
                raise self.error("a stage count is one expression: `bf16[3][128, 64]`")
            stages = first[0]
            shape = self.expr_list("]")
        else:
            shape = first
        return name, dtype, stages, shape

    def smem(self, start: int) -> n.Smem:
        name, dtype, stages, shape = self.staged_decl("a buffer name")
        swizzle = pad = align = None
        while True:
            if self.accept("swizzle"):
                t = self.toks[self.i]
                if t not in SWIZZLES:
                    modes = ", ".join(f"`{m}`" for m in SWIZZLES)
                    raise self.error(f"expected a swizzle mode ({modes}) after `swizzle`, found {describe(t)}")
                swizzle = t
                self.i += 1
            elif self.accept("pad"):
                pad = self.expr()
            elif self.accept("align"):
                align = self.expr()
            else:
                break
        return n.Smem(name, dtype, shape, stages, swizzle, pad, align, loc=self.span(start))

    def role(self) -> n.Role:
        start = self.expect("role")
        name = self.ident("a role name")
        self.expect("warps", "after the role name")
        lo = self.expr(_ADD)
        self.expect("..", "in the warp range (half-open: `warps 4..12`)")
        hi = self.expr(_ADD)
        per = self.expr() if self.accept("per") else None
        regs = self.expr() if self.accept("regs") else None
        header = self.span(start)
        self.expect(":", "at the end of the role header")
        self.newline("after the role header")
        body = self.block()
        return n.Role(name, lo, hi, per, regs, body, loc=header)

    # -- statements ----------------------------------------------------------------------------------

    def block(self) -> tuple[n.Stmt, ...]:
        self.indent("an indented block")
        out = []
        toks = self.toks
        while toks[self.i] != DEDENT:
            out.append(self.stmt())
        self.i += 1
        return tuple(out)

    def stmt(self) -> n.Stmt:
        s = self.i
        key = self.toks[s]
        if key == "for":
            self.i += 1
            var = self.ident("a loop variable")
            self.expect("in")
            lo = self.expr(_ADD)
            self.expect("..", "in the loop range (half-open: `0 .. K`)")
            hi = self.expr(_ADD)
            step = self.expr() if self.accept("step") else None
            loc = self.span(s)
            self.expect(":", "at the end of the `for` header")
            self.newline("after the `for` header")
            return n.For(var, lo, hi, step, self.block(), loc=loc)
        if key == "if":
            self.i += 1
            cond = self.expr()
            loc = self.span(s)
            self.expect(":", "at the end of the `if` header")
            self.newline("after the `if` header")
            then = self.block()
            orelse: tuple[n.Stmt, ...] = ()
            if self.accept("else"):
                self.expect(":")
                self.newline("after `else:`")
                orelse = self.block()
            return n.If(cond, then, orelse, loc=loc)
        if key == "let":
            self.i += 1
            name = self.ident("a name")
            self.expect("=")
            value = self.expr()
            loc = self.span(s)
            self.newline("after the `let`")
            return n.Let(name, value, loc=loc)
        if key == "reg":
            self.i += 1
            name = self.ident("a register tile name")
            self.expect(":")
            dtype = self.ident("an element type")
            self.expect("[")
            shape = self.expr_list("]")
            layout = None
            if self.accept("layout"):
                ls = self.i
                lname = self.ident("a layout name")
                largs: tuple[n.Expr, ...] = ()
                if self.accept("("):
                    largs = self.expr_list(")")
                layout = n.Layout(lname, largs, loc=self.span(ls))
            loc = self.span(s)
            self.newline("after the register tile")
            return n.RegDecl(name, dtype, shape, layout, loc=loc)
        if key[0] in _NAME_START and key not in KEYWORDS:
            return self.op()
        raise self.error(f"expected a statement, found {describe(key)}")

    def op(self) -> n.Op:
        s = self.i
        toks = self.toks
        self.i += 1
        outs: list[n.Expr] = []
        ins: list[n.Expr] = []
        attrs: list[n.Attr] = []
        cur = ins
        arrow = False
        if toks[self.i] != NEWLINE:
            while True:
                t = toks[self.i]
                if t == "<-":
                    self.i += 1
                    if arrow:
                        raise self.error("an operation has one `<-`")
                    arrow = True
                    outs, ins = ins, []
                    cur = ins
                    if toks[self.i] == NEWLINE:
                        break
                    continue
                if toks[self.i + 1] == "=" and t[0] in _NAME_START:  # never past the end: EOF is last
                    a = self.i
                    self.i += 2
                    value = self.expr()
                    attrs.append(n.Attr(t, value, loc=self.span(a)))  # type: ignore[arg-type]
                elif t in FLAGS and toks[self.i + 1] in (NEWLINE, ","):
                    # a bare flag (`, multicast`): the attribute `multicast` naming itself
                    a = self.i
                    self.i += 1
                    attrs.append(n.Attr(t, n.Name(t, loc=self.span(a)), loc=self.span(a)))  # type: ignore[arg-type]
                else:
                    if attrs:
                        raise self.error("operands come before attributes (`key=value`)")
                    cur.append(self.expr())
                key = toks[self.i]
                if key == "<-":
                    continue
                if key != ",":
                    break
                self.i += 1
        loc = self.span(s)
        self.newline("after the operation")
        return n.Op(toks[s], tuple(outs), tuple(ins), tuple(attrs), loc=loc)  # type: ignore[return-value]

    # -- expressions ---------------------------------------------------------------------------------

    def expr_list(self, close: str) -> tuple[n.Expr, ...]:
        """Comma-separated expressions (a trailing comma allowed) up to the bracket ``close``."""
        out = []
        toks = self.toks
        while toks[self.i] != close:
            out.append(self.expr())
            if toks[self.i] != ",":
                break
            self.i += 1
        self.expect(close)
        return tuple(out)

    def expr(self, level: int = _OR) -> n.Expr:
        """An expression whose binary operators bind at least as tightly as ``level``.

        Precedence climbing over :data:`_BINARY`, so that an operand with no operator after it (most
        expressions) costs two calls (this and :meth:`operand`) instead of one per precedence level.
        Binary operators associate to the left, except comparisons, which do not chain: after ``a < b``
        only ``and`` and ``or`` may follow, as after ``not a``, whose operand takes every operator
        binding tighter than ``and``. ``ceiling`` is the loosest operator the loop may still take.
        """
        toks = self.toks
        s = self.i
        if level <= _NOT and toks[s] == "not":
            self.i += 1
            operand = self.expr(_NOT)
            left = n.Unary("not", operand, loc=self.prefixed(s, operand))  # type: ignore[assignment]
            ceiling = _AND
        else:
            left = self.operand()
            ceiling = _MUL
        while True:
            op = toks[self.i]
            prec = _BINARY.get(op)
            if prec is None or prec < level or prec > ceiling:
                return left  # type: ignore[no-any-return]
            self.i += 1
            right = self.expr(prec + 1)
            a, b = left.loc, right.loc
            left = n.Bin(op, left, right, loc=Loc(a.file, a.line, a.col, b.end_line, b.end_col))  # type: ignore[assignment]
            ceiling = _CMP - 1 if prec == _CMP else prec

    def operand(self) -> n.Expr:
        """A number, name, call, tile reference or parenthesized expression, or a unary minus and its
        operand (folded into a number literal)."""
        toks = self.toks
        s = self.i
        t = toks[s]
        c = t[0]
        if c in _NAME_START and t not in KEYWORDS and "." not in t:
            self.i = s + 1
            key = toks[s + 1]
            if key == "(":
                self.i += 1
                args = self.expr_list(")")
                return n.Call(t, args, loc=self.span(s))  # type: ignore[return-value]
            if key != "[" and key != "^T":
                line = self.lines[s]
                return n.Name(t, loc=Loc(self.file, line, self.cols[s], line, self.ends[s]))  # type: ignore[return-value]
            index: list[n.Idx] = []
            while toks[self.i] == "[":
                self.i += 1
                while toks[self.i] != "]":
                    index.append(self.index_item())
                    if toks[self.i] != ",":
                        break
                    self.i += 1
                self.expect("]")
            transpose = self.accept("^T")
            if index or transpose:
                return n.Ref(t, tuple(index), transpose, loc=self.span(s))  # type: ignore[return-value]
            # `x[]`: a plain name, located at the name alone
            return n.Name(t, loc=self.loc(s))  # type: ignore[return-value]
        if c in _DIGITS and t[-1] != "B":
            self.i = s + 1
            v: int | float = float(t) if ("." in t or "e" in t or "E" in t) else int(t)
            line = self.lines[s]
            return n.Num(v, loc=Loc(self.file, line, self.cols[s], line, self.ends[s]))  # type: ignore[return-value]
        if t == "-":
            self.i = s + 1
            operand = self.operand()
            loc = self.prefixed(s, operand)
            if isinstance(operand, n.Num):
                return n.Num(-operand.value, loc=loc)  # type: ignore[return-value]
            return n.Unary("-", operand, loc=loc)  # type: ignore[return-value]
        if t == "(":
            self.i = s + 1
            e = self.expr()
            self.expect(")")
            return e
        raise self.error(f"expected an expression, found {describe(t)}")

    def prefixed(self, start: int, operand: n.Expr) -> Loc:
        """The span of the prefix operator at token ``start`` and its ``operand``."""
        b = operand.loc
        return Loc(self.file, self.lines[start], self.cols[start], b.end_line, b.end_col)  # type: ignore[return-value]

    def index_item(self) -> n.Idx:
        s = self.i
        if self.toks[s] == ":":
            self.i += 1
            return n.All(loc=self.loc(s))  # type: ignore[return-value]
        start = self.expr()
        if self.accept(":"):
            self.expect("+", "before a slice size (`start : +size`)")
            size = self.expr()
            return n.Span(start, size, loc=self.span(s))  # type: ignore[return-value]
        return n.At(start, loc=self.span(s))  # type: ignore[return-value]


def parse(text: str, file: str = "<string>") -> n.Module:
    """Parse a module; raises :class:`DiagnosticError` with a ``CK001`` diagnostic on bad syntax."""
    return Parser(text, file).module()


def parse_file(path: str | Path) -> tuple[n.Module, str]:
    """Parse a file; a missing or unreadable file is a user error."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise CakeUserError(f"no such file: {p}") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise CakeUserError(f"cannot read {p}: {exc}") from None
    return parse(text, str(path)), text
