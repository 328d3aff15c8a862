"""Recursive-descent parser for ``.cake`` text. Every node keeps the span it was parsed from.

The grammar knows declarations and control flow; operations are all parsed in one generic form,
``name outs <- ins, key=value, ...``, so a primitive from a plugin needs no change here.
"""

from __future__ import annotations

from pathlib import Path

from cake_core.diagnostics.codes import SYNTAX
from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeUserError
from cake_core.ir import nodes as n
from cake_core.ir.lexer import Token, tokenize
from cake_core.ir.location import Loc

KEYWORDS = frozenset(
    "kernel program domain const grid over cta smem barrier role for in if else let reg layout "
    "launch buffer warps per regs step and or not global scalar occupancy cluster swizzle pad "
    "align count mbarrier".split()
)
_CMP = ("<", "<=", ">", ">=", "==", "!=")


class Parser:
    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.toks = tokenize(text, file)
        self.i = 0

    # -- token helpers -------------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.kind in ("OP", "NAME", "WORD") and t.text == text

    def accept(self, text: str) -> Token | None:
        if self.at(text):
            t = self.tok
            self.i += 1
            return t
        return None

    def error(self, message: str, tok: Token | None = None, help: str | None = None) -> DiagnosticError:
        tok = tok or self.tok
        return DiagnosticError([SYNTAX.at(tok.loc, message, label="here", help=help)])

    def expect(self, text: str, context: str = "") -> Token:
        t = self.accept(text)
        if t is None:
            where = f" {context}" if context else ""
            raise self.error(f"expected `{text}`{where}, found {self.tok}")
        return t

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}, found {self.tok}")
        t = self.tok
        self.i += 1
        return t

    def ident(self, what: str = "a name") -> Token:
        t = self.tok
        if t.kind != "NAME" or t.text in KEYWORDS or "." in t.text:
            raise self.error(f"expected {what}, found {t}")
        self.i += 1
        return t

    def newline(self, context: str) -> None:
        if self.tok.kind != "NEWLINE":
            raise self.error(f"expected end of line {context}, found {self.tok}")
        self.i += 1

    def span(self, start: Token) -> Loc:
        prev = self.toks[self.i - 1]
        return start.loc.to(prev.loc)

    # -- module --------------------------------------------------------------------------------------

    def module(self) -> n.Module:
        kernels: list[n.Kernel] = []
        program: n.Program | None = None
        while self.tok.kind != "EOF":
            if self.tok.kind == "NEWLINE":
                self.i += 1
            elif self.at("kernel"):
                kernels.append(self.kernel())
            elif self.at("program"):
                if program is not None:
                    raise self.error("a module has at most one `program`")
                program = self.program()
            else:
                raise self.error(f"expected `kernel` or `program`, found {self.tok}")
        if not kernels:
            raise DiagnosticError(
                [SYNTAX.at(self.tok.loc, "a module needs at least one `kernel`", label="file ends here")]
            )
        return n.Module(tuple(kernels), program, path=self.file)

    def params(self) -> tuple[n.Param, ...]:
        self.expect("(", "before the parameters")
        params = []
        while not self.at(")"):
            start = self.tok
            name = self.ident("a parameter name").text
            self.expect(":", "after the parameter name")
            if self.accept("global"):
                dtype = self.ident("an element type").text
                self.expect("[", "before the parameter's shape")
                shape = self.expr_list("]")
                params.append(n.Param(name, "global", dtype, shape, loc=self.span(start)))
            elif self.accept("scalar"):
                dtype = self.ident("an element type").text
                params.append(n.Param(name, "scalar", dtype, (), loc=self.span(start)))
            else:
                raise self.error(f"expected `global` or `scalar`, found {self.tok}")
            if not self.accept(","):
                break
        self.expect(")", "after the parameters")
        return tuple(params)

    def domain(self) -> list[n.Constraint]:
        self.expect("domain")
        out = []
        while True:
            start = self.tok
            var = self.ident("a size or type variable").text
            if self.accept("in"):
                self.expect("{", "before the set of values")
                values = self.expr_list("}")
                out.append(n.Constraint(var, "in", values, loc=self.span(start)))
            elif self.at(">=") or self.at("<="):
                op = self.tok.text
                self.i += 1
                out.append(n.Constraint(var, op, (self.expr(),), loc=self.span(start)))
            elif self.accept("%"):
                m = self.expr_add()
                self.expect("==", "in a divisibility clause (`N % 8 == 0`)")
                zero = self.expect_kind("NUMBER", "`0`")
                if zero.text != "0":
                    raise self.error("a divisibility clause ends in `== 0`", zero)
                out.append(n.Constraint(var, "%", (m,), loc=self.span(start)))
            else:
                raise self.error(
                    f"expected `in`, `>=`, `<=` or `%` in a domain clause, found {self.tok}",
                    help="e.g. `domain B >= 1, N % 8 == 0, D in {64, 128}`",
                )
            if not self.accept(","):
                break
        return out

    def program(self) -> n.Program:
        start = self.expect("program")
        name = self.ident("a program name").text
        params = self.params()
        self.newline("after the program header")
        self.expect_kind("INDENT", "an indented program body")
        domain: list[n.Constraint] = []
        buffers, launches = [], []
        while self.tok.kind != "DEDENT":
            s = self.tok
            if self.at("domain"):
                domain += self.domain()
            elif self.accept("buffer"):
                bname = self.ident("a buffer name").text
                self.expect(":")
                self.expect("global", "(program buffers live in global memory)")
                dtype = self.ident("an element type").text
                self.expect("[")
                shape = self.expr_list("]")
                buffers.append(n.Buffer(bname, dtype, shape, loc=self.span(s)))
            elif self.accept("launch"):
                kname = self.ident("a kernel name").text
                self.expect("(")
                args = []
                while not self.at(")"):
                    args.append(self.ident("an argument name").text)
                    if not self.accept(","):
                        break
                self.expect(")")
                launches.append(n.Launch(kname, tuple(args), loc=self.span(s)))
            else:
                raise self.error(f"expected `domain`, `buffer` or `launch`, found {self.tok}")
            self.newline("after a program item")
        self.i += 1
        return n.Program(name, params, tuple(domain), tuple(buffers), tuple(launches), loc=start.loc)

    # -- kernel --------------------------------------------------------------------------------------

    def kernel(self) -> n.Kernel:
        start = self.expect("kernel")
        name = self.ident("a kernel name").text
        params = self.params()
        self.newline("after the kernel header")
        self.expect_kind("INDENT", "an indented kernel body")
        domain: list[n.Constraint] = []
        consts: list[n.Const] = []
        grid = cta = None
        smem: list[n.Smem] = []
        barriers: list[n.Barrier] = []
        roles: list[n.Role] = []
        while self.tok.kind != "DEDENT":
            s = self.tok
            if self.at("domain"):
                domain += self.domain()
                self.newline("after the domain")
            elif self.accept("const"):
                while True:
                    cs = self.tok
                    cname = self.ident("a constant name").text
                    self.expect("=")
                    consts.append(n.Const(cname, self.expr(), loc=self.span(cs)))
                    if not self.accept(","):
                        break
                self.newline("after the constants")
            elif self.accept("grid"):
                if grid is not None:
                    raise self.error("a kernel has one `grid`", s)
                self.expect("(")
                gvars = []
                while not self.at(")"):
                    gvars.append(self.ident("a grid variable").text)
                    if not self.accept(","):
                        break
                self.expect(")")
                self.expect("over")
                self.expect("(")
                extents = self.expr_list(")")
                grid = n.Grid(tuple(gvars), extents, loc=self.span(s))
                self.newline("after the grid")
            elif self.accept("cta"):
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
            elif self.accept("smem"):
                smem.append(self.smem(s))
                self.newline("after the buffer")
            elif self.accept("barrier"):
                bname = self.ident("a barrier name").text
                self.expect(":")
                kind = self.expect("mbarrier", "(the barrier kind)").text
                stages = None
                if self.accept("["):
                    stages = self.expr()
                    self.expect("]")
                self.expect("count", "(arrivals per phase)")
                barriers.append(n.Barrier(bname, kind, self.expr(), stages, loc=self.span(s)))
                self.newline("after the barrier")
            elif self.at("role"):
                roles.append(self.role())
            else:
                raise self.error(
                    f"expected a kernel item (`domain`, `const`, `grid`, `cta`, `smem`, `barrier`, "
                    f"`role`), found {self.tok}"
                )
        self.i += 1
        if grid is None:
            raise DiagnosticError([SYNTAX.at(start.loc, f"kernel `{name}` has no `grid` line")])
        if cta is None:
            raise DiagnosticError([SYNTAX.at(start.loc, f"kernel `{name}` has no `cta` line")])
        if not roles:
            raise DiagnosticError([SYNTAX.at(start.loc, f"kernel `{name}` has no `role`")])
        return n.Kernel(
            name, params, tuple(domain), tuple(consts), grid, cta, tuple(smem), tuple(barriers),
            tuple(roles), loc=start.loc,
        )  # fmt: skip

    def smem(self, start: Token) -> n.Smem:
        name = self.ident("a buffer name").text
        self.expect(":")
        dtype = self.ident("an element type").text
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
        swizzle = pad = align = None
        while True:
            if self.accept("swizzle"):
                t = self.tok
                if t.kind != "WORD" or t.text not in ("32B", "64B", "128B"):
                    raise self.error(f"expected `32B`, `64B` or `128B` after `swizzle`, found {t}")
                swizzle = t.text
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
        name = self.ident("a role name").text
        self.expect("warps", "after the role name")
        lo = self.expr_add()
        self.expect("..", "in the warp range (half-open: `warps 4..12`)")
        hi = self.expr_add()
        per = self.expr() if self.accept("per") else None
        regs = self.expr() if self.accept("regs") else None
        header = self.span(start)
        self.expect(":", "at the end of the role header")
        self.newline("after the role header")
        body = self.block()
        return n.Role(name, lo, hi, per, regs, body, loc=header)

    # -- statements ----------------------------------------------------------------------------------

    def block(self) -> tuple[n.Stmt, ...]:
        self.expect_kind("INDENT", "an indented block")
        out = []
        while self.tok.kind != "DEDENT":
            out.append(self.stmt())
        self.i += 1
        return tuple(out)

    def stmt(self) -> n.Stmt:
        s = self.tok
        if self.accept("for"):
            var = self.ident("a loop variable").text
            self.expect("in")
            lo = self.expr_add()
            self.expect("..", "in the loop range (half-open: `0 .. K`)")
            hi = self.expr_add()
            step = self.expr() if self.accept("step") else None
            loc = self.span(s)
            self.expect(":", "at the end of the `for` header")
            self.newline("after the `for` header")
            return n.For(var, lo, hi, step, self.block(), loc=loc)
        if self.accept("if"):
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
        if self.accept("let"):
            name = self.ident("a name").text
            self.expect("=")
            value = self.expr()
            loc = self.span(s)
            self.newline("after the `let`")
            return n.Let(name, value, loc=loc)
        if self.accept("reg"):
            name = self.ident("a register tile name").text
            self.expect(":")
            dtype = self.ident("an element type").text
            self.expect("[")
            shape = self.expr_list("]")
            layout = None
            if self.accept("layout"):
                ls = self.tok
                lname = self.ident("a layout name").text
                largs: tuple[n.Expr, ...] = ()
                if self.accept("("):
                    largs = self.expr_list(")")
                layout = n.Layout(lname, largs, loc=self.span(ls))
            loc = self.span(s)
            self.newline("after the register tile")
            return n.RegDecl(name, dtype, shape, layout, loc=loc)
        if s.kind == "NAME" and s.text not in KEYWORDS:
            return self.op()
        raise self.error(f"expected a statement, found {s}")

    def op(self) -> n.Op:
        s = self.tok
        self.i += 1
        outs: list[n.Expr] = []
        ins: list[n.Expr] = []
        attrs: list[n.Attr] = []
        cur = ins
        arrow = False
        if self.tok.kind != "NEWLINE":
            while True:
                if self.accept("<-"):
                    if arrow:
                        raise self.error("an operation has one `<-`")
                    arrow = True
                    outs, ins = ins, []
                    cur = ins
                    if self.tok.kind == "NEWLINE":
                        break
                    continue
                if self.tok.kind == "NAME" and self.peek().kind == "OP" and self.peek().text == "=":
                    a = self.tok
                    self.i += 2
                    attrs.append(n.Attr(a.text, self.expr(), loc=self.span(a)))
                else:
                    if attrs:
                        raise self.error("operands come before attributes (`key=value`)")
                    cur.append(self.expr())
                if self.at("<-"):
                    continue
                if not self.accept(","):
                    break
        loc = self.span(s)
        self.newline("after the operation")
        return n.Op(s.text, tuple(outs), tuple(ins), tuple(attrs), loc=loc)

    # -- expressions ---------------------------------------------------------------------------------

    def expr_list(self, close: str) -> tuple[n.Expr, ...]:
        out = []
        while not self.at(close):
            out.append(self.expr())
            if not self.accept(","):
                break
        self.expect(close)
        return tuple(out)

    def expr(self) -> n.Expr:
        left = self.expr_and()
        while self.accept("or"):
            right = self.expr_and()
            left = n.Bin("or", left, right, loc=left.loc.to(right.loc))
        return left

    def expr_and(self) -> n.Expr:
        left = self.expr_not()
        while self.accept("and"):
            right = self.expr_not()
            left = n.Bin("and", left, right, loc=left.loc.to(right.loc))
        return left

    def expr_not(self) -> n.Expr:
        s = self.tok
        if self.accept("not"):
            operand = self.expr_not()
            return n.Unary("not", operand, loc=s.loc.to(operand.loc))
        return self.expr_cmp()

    def expr_cmp(self) -> n.Expr:
        left = self.expr_add()
        if self.tok.kind == "OP" and self.tok.text in _CMP:
            op = self.tok.text
            self.i += 1
            right = self.expr_add()
            left = n.Bin(op, left, right, loc=left.loc.to(right.loc))
        return left

    def expr_add(self) -> n.Expr:
        left = self.expr_mul()
        while self.tok.kind == "OP" and self.tok.text in ("+", "-"):
            op = self.tok.text
            self.i += 1
            right = self.expr_mul()
            left = n.Bin(op, left, right, loc=left.loc.to(right.loc))
        return left

    def expr_mul(self) -> n.Expr:
        left = self.expr_unary()
        while self.tok.kind == "OP" and self.tok.text in ("*", "/", "%"):
            op = self.tok.text
            self.i += 1
            right = self.expr_unary()
            left = n.Bin(op, left, right, loc=left.loc.to(right.loc))
        return left

    def expr_unary(self) -> n.Expr:
        s = self.tok
        if self.accept("-"):
            operand = self.expr_unary()
            if isinstance(operand, n.Num):
                return n.Num(-operand.value, loc=s.loc.to(operand.loc))
            return n.Unary("-", operand, loc=s.loc.to(operand.loc))
        return self.expr_postfix()

    def expr_postfix(self) -> n.Expr:
        s = self.tok
        if s.kind == "NUMBER":
            self.i += 1
            v = float(s.text) if any(ch in s.text for ch in ".eE") else int(s.text)
            return n.Num(v, loc=s.loc)
        if self.accept("("):
            e = self.expr()
            self.expect(")")
            return e
        if s.kind == "NAME" and s.text not in KEYWORDS and "." not in s.text:
            self.i += 1
            if self.at("("):
                self.i += 1
                args = self.expr_list(")")
                return n.Call(s.text, args, loc=self.span(s))
            index: list[n.Idx] = []
            while self.accept("["):
                while not self.at("]"):
                    index.append(self.index_item())
                    if not self.accept(","):
                        break
                self.expect("]")
            transpose = self.accept("^T") is not None
            if index or transpose:
                return n.Ref(s.text, tuple(index), transpose, loc=self.span(s))
            return n.Name(s.text, loc=s.loc)
        raise self.error(f"expected an expression, found {s}")

    def index_item(self) -> n.Idx:
        s = self.tok
        if self.at(":"):
            self.i += 1
            return n.All(loc=s.loc)
        start = self.expr()
        if self.accept(":"):
            self.expect("+", "before a slice size (`start : +size`)")
            size = self.expr()
            return n.Span(start, size, loc=self.span(s))
        return n.At(start, loc=self.span(s))


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
