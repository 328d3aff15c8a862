"""Canonical text of Cake IR. ``parse(print_module(m)) == m`` for every module ``m``."""

from __future__ import annotations

import math

from cake_core.ir import nodes as n

_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4, "+": 5, "-": 5,
         "*": 6, "/": 6, "%": 6}  # fmt: skip
_INDENT = "  "


def expr(e: n.Expr, parent: int = 0) -> str:
    if isinstance(e, n.Num):
        v = e.value
        if isinstance(v, float):
            if math.isinf(v):
                return "inf" if v > 0 else "-inf"
            return repr(v)
        return str(v)
    if isinstance(e, n.Name):
        return e.id
    if isinstance(e, n.Unary):
        if e.op == "not":
            s = f"not {expr(e.operand, 3)}"
            return f"({s})" if parent > 3 else s
        return f"-{expr(e.operand, 7)}"
    if isinstance(e, n.Bin):
        p = _PREC[e.op]
        # left-associative: the right operand of an equal-precedence operator needs parentheses;
        # comparisons do not chain, so both sides bind tighter
        lp = p + 1 if p == 4 else p
        s = f"{expr(e.left, lp)} {e.op} {expr(e.right, p + 1)}"
        return f"({s})" if p < parent else s
    if isinstance(e, n.Call):
        return f"{e.fn}({', '.join(expr(a) for a in e.args)})"
    if isinstance(e, n.Ref):
        s = e.name
        if e.index:
            s += "[" + ", ".join(index(i) for i in e.index) + "]"
        return s + ("^T" if e.transpose else "")
    raise TypeError(f"not an expression: {e!r}")


def index(i: n.Idx) -> str:
    if isinstance(i, n.All):
        return ":"
    if isinstance(i, n.Span):
        return f"{expr(i.start)} : +{expr(i.size)}"
    if isinstance(i, n.At):
        return expr(i.expr)
    raise TypeError(f"not an index: {i!r}")


def _list(es) -> str:
    return ", ".join(expr(e) for e in es)


def param(p: n.Param) -> str:
    if p.tier == "scalar":
        return f"{p.name}: scalar {p.dtype}"
    return f"{p.name}: global {p.dtype}[{_list(p.shape)}]"


def constraint(c: n.Constraint) -> str:
    if c.op == "in":
        return f"{c.var} in {{{_list(c.values)}}}"
    if c.op == "%":
        return f"{c.var} % {expr(c.values[0])} == 0"
    return f"{c.var} {c.op} {expr(c.values[0])}"


def _is_flag(a: n.Attr) -> bool:
    """A bare flag (`, multicast`): an attribute whose value is its own name."""
    return isinstance(a.value, n.Name) and a.value.id == a.key


def op(o: n.Op) -> str:
    parts = [o.name]
    operands = []
    if o.outs:
        operands.append(_list(o.outs) + " <-" + (" " + _list(o.ins) if o.ins else ""))
    elif o.ins:
        operands.append(_list(o.ins))
    items = operands + [a.key if _is_flag(a) else f"{a.key}={expr(a.value)}" for a in o.attrs]
    if items:
        parts.append(", ".join(items))
    return " ".join(parts)


def stmts(body: tuple[n.Stmt, ...], depth: int) -> list[str]:
    pad = _INDENT * depth
    out: list[str] = []
    for s in body:
        if isinstance(s, n.Op):
            out.append(pad + op(s))
        elif isinstance(s, n.Let):
            out.append(f"{pad}let {s.name} = {expr(s.value)}")
        elif isinstance(s, n.RegDecl):
            line = f"{pad}reg {s.name}: {s.dtype}[{_list(s.shape)}]"
            if s.layout is not None:
                line += f" layout {s.layout.name}"
                if s.layout.args:
                    line += f"({_list(s.layout.args)})"
            out.append(line)
        elif isinstance(s, n.For):
            step = f" step {expr(s.step)}" if s.step is not None else ""
            out.append(f"{pad}for {s.var} in {expr(s.start, 5)} .. {expr(s.stop, 5)}{step}:")
            out += stmts(s.body, depth + 1)
        elif isinstance(s, n.If):
            out.append(f"{pad}if {expr(s.cond)}:")
            out += stmts(s.then, depth + 1)
            if s.orelse:
                out.append(f"{pad}else:")
                out += stmts(s.orelse, depth + 1)
        else:
            raise TypeError(f"not a statement: {s!r}")
    return out


def smem(s: n.Smem) -> str:
    stages = f"[{expr(s.stages)}]" if s.stages is not None else ""
    line = f"smem {s.name}: {s.dtype}{stages}[{_list(s.shape)}]"
    if s.swizzle:
        line += f" swizzle {s.swizzle}"
    if s.pad is not None:
        line += f" pad {expr(s.pad)}"
    if s.align is not None:
        line += f" align {expr(s.align)}"
    return line


def kernel(k: n.Kernel) -> list[str]:
    pad = _INDENT
    out = [f"kernel {k.name}({', '.join(param(p) for p in k.params)})"]
    if k.domain:
        out.append(f"{pad}domain {', '.join(constraint(c) for c in k.domain)}")
    for c in k.consts:
        out.append(f"{pad}const {c.name} = {expr(c.value)}")
    out.append(f"{pad}grid ({', '.join(k.grid.vars)}) over ({_list(k.grid.extents)})")
    cta = f"{pad}cta warps {expr(k.cta.warps)}"
    if k.cta.occupancy is not None:
        cta += f" occupancy {expr(k.cta.occupancy)}"
    if k.cta.cluster:
        cta += f" cluster ({_list(k.cta.cluster)})"
    out.append(cta)
    for s in k.smem:
        out.append(pad + smem(s))
    for b in k.barriers:
        stages = f"[{expr(b.stages)}]" if b.stages is not None else ""
        out.append(f"{pad}barrier {b.name}: {b.kind}{stages} count {expr(b.count)}")
    for m in k.mems:
        stages = f"[{expr(m.stages)}]" if m.stages is not None else ""
        out.append(f"{pad}{m.tier} {m.name}: {m.dtype}{stages}[{_list(m.shape)}]")
    for p in k.pipes:
        line = f"{pad}pipe {p.name}: {', '.join(p.producers)} -> {', '.join(p.consumers)} of {', '.join(p.buffers)}"
        out.append(line + (" cluster" if p.cluster else ""))
    for r in k.roles:
        head = f"{pad}role {r.name} warps {expr(r.warp_start, 5)}..{expr(r.warp_stop, 5)}"
        if r.per is not None:
            head += f" per {expr(r.per)}"
        if r.regs is not None:
            head += f" regs {expr(r.regs)}"
        out.append(head + ":")
        out += stmts(r.body, 2)
    return out


def program(p: n.Program) -> list[str]:
    pad = _INDENT
    out = [f"program {p.name}({', '.join(param(x) for x in p.params)})"]
    if p.domain:
        out.append(f"{pad}domain {', '.join(constraint(c) for c in p.domain)}")
    for b in p.buffers:
        out.append(f"{pad}buffer {b.name}: global {b.dtype}[{_list(b.shape)}]")
    for launch in p.launches:
        out.append(f"{pad}launch {launch.kernel}({', '.join(launch.args)})")
    return out


def print_module(m: n.Module) -> str:
    blocks = []
    if m.program is not None:
        blocks.append("\n".join(program(m.program)))
    blocks += ["\n".join(kernel(k)) for k in m.kernels]
    return "\n\n".join(blocks) + "\n"
