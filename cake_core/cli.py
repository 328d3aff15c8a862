"""The ``cake`` command.

Exit codes: 0 success; 1 the input was checked and findings are errors (``verify``) or a candidate
failed (``bench``); 2 bad usage or input (one line on stderr, never a traceback); 3 an internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn


from cake_core import __version__
from cake_core.console import print_json, print_table
from cake_core.convert import unstructure
from cake_core.errors import CakeError, CakeUserError

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise CakeUserError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def _registry():
    from cake_core import plugins

    return plugins.registry()


# ---------------------------------------------------------------------------------------------------
# plugins, targets
# ---------------------------------------------------------------------------------------------------


def cmd_plugins(args: argparse.Namespace) -> int:
    reg = _registry()
    records = []
    for name, info in sorted(reg.plugins.items(), key=lambda kv: (not kv[1].builtin, kv[0])):
        registered = reg.registered_by(name)
        records.append(
            {
                "name": name,
                "distribution": info.distribution,
                "version": info.version,
                "builtin": info.builtin,
                "module": info.module,
                "categories": sorted(registered),
                "registered": registered,
            }
        )
    if args.json:
        print_json(records)
        return 0
    rows = [
        (
            r["name"],
            r["distribution"],
            r["version"],
            ", ".join(f"{c}: {', '.join(ns)}" for c, ns in r["registered"].items()) or "(nothing)",
        )
        for r in records
    ]
    print_table("Cake plugins", ["plugin", "distribution", "version", "registered"], rows)
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    reg = _registry()
    targets = reg.values("targets")
    if args.json:
        records = []
        for t in targets:
            rec = unstructure(t)
            info = reg.registration("targets", t.name).plugin
            rec["plugin"] = {"distribution": info.distribution, "version": info.version}
            records.append(rec)
        print_json(records)
        return 0
    rows = [
        (
            t.name,
            t.product,
            f"{t.architecture} {t.nvrtc_arch}",
            t.sm_count,
            f"{t.smem_per_block_optin // 1024} KiB",
            f"{t.l2_bytes / 2**20:.0f} MiB",
            f"{t.dram_bandwidth_gbs / 1000:.2f} TB/s",
            f"{t.tensor_tflops.get('bf16', 0):.0f}",
            " ".join(sorted(f.value for f in t.features)),
        )
        for t in targets
    ]
    print_table(
        "Cake targets",
        ["target", "product", "arch", "SMs", "smem/block", "L2", "DRAM", "bf16 TFLOP/s", "features"],
        rows,
    )
    return 0


# ---------------------------------------------------------------------------------------------------
# verify, explain
# ---------------------------------------------------------------------------------------------------


def cmd_verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cake_core.diagnostics.render import render_all
    from cake_core.verify.runner import verify_source

    reg = _registry()
    target = reg.get("targets", args.target)
    problem = reg.get("problems", args.problem) if args.problem is not None else None
    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CakeUserError(f"no such file: {path}") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise CakeUserError(f"cannot read {path}: {exc}") from None
    report = verify_source(text, str(path), target, reg)
    diagnostics = list(report.diagnostics)
    gate = None
    if problem is not None and report.ok:
        from cake_core.ir.parser import parse
        from cake_core.verify.interp_gate import run_gate

        gate = run_gate(problem, parse(text, str(path)), reg)
        diagnostics += gate.diagnostics
    ok = report.ok and (gate is None or gate.ok)
    if args.json:
        print_json(diagnostics)
    elif diagnostics:
        sys.stdout.write(render_all(diagnostics, {str(path): text}) + "\n")
        if problem is not None and gate is None:
            sys.stdout.write(
                f"{path}: the interpreter did not run for `{problem.name}`: the static rules found errors\n"
            )
    else:
        sys.stdout.write(
            f"{path}: clean on `{target.name}` ({target.nvrtc_arch}): {report.kernels} kernel(s), "
            f"{report.specializations} specialization(s), {len(report.rules)} rule(s)\n"
        )
        if gate is not None:
            sys.stdout.write(
                f"{path}: clean in the interpreter with the oracle of `{problem.name}` "  # type: ignore[union-attr]
                f"({gate.seconds:.2f}s): " + "; ".join(r.describe() for r in gate.runs) + "\n"
            )
    return 0 if ok else 1


def explanation_of(code: str) -> tuple[str, str]:
    """The documentation of a diagnostic code (core ``CK``, semantics ``CS``, or a registered rule),
    as (heading, markdown); raises :class:`UnknownNameError` for a code nobody defines."""
    from cake_core.diagnostics.codes import CORE_CODES, Code
    from cake_core.errors import UnknownNameError

    wanted = code.strip().upper()
    known: dict[str, tuple[str, str]] = {}
    for c in CORE_CODES.values():
        known[c.code] = (f"{c.code} ({c.slug}, {c.severity.value}, cake-core): {c.summary}", c.explanation)
    for c in _semantics_codes(Code):
        known.setdefault(c.code, (f"{c.code} ({c.slug}, {c.severity.value}, cake-core): {c.summary}", c.explanation))
    reg = _registry()
    for name in reg.names("rules"):
        r = reg.registration("rules", name)
        rule = r.obj
        heading = (
            f"{rule.name} ({rule.slug}, {rule.severity.value}, {r.plugin.distribution} {r.plugin.version}): "
            f"{rule.summary}"
        )
        known.setdefault(rule.name, (heading, rule.explanation.strip()))
    if wanted not in known:
        raise UnknownNameError("diagnostic code", code, list(known))
    return known[wanted]


def _semantics_codes(code_type: type) -> list:
    """The ``CS`` codes of the reference interpreter, if that part of the core is present."""
    import importlib

    try:
        module = importlib.import_module("cake_core.semantics.codes")
    except Exception:  # not built yet, or broken: `explain` still serves every other code
        return []
    out = []
    for value in vars(module).values():
        items = value.values() if isinstance(value, dict) else (value,)
        out.extend(v for v in items if isinstance(v, code_type))
    return out


def cmd_explain(args: argparse.Namespace) -> int:
    heading, text = explanation_of(args.code)
    sys.stdout.write(f"{heading}\n\n{text}\n")
    return 0


def cmd_reduce(args: argparse.Namespace) -> int:
    """Shrink a file while verifying it (or, with --problem, its interpreter gate) still reports a code."""
    from pathlib import Path

    from cake_core.diagnostics.diagnostic import DiagnosticError
    from cake_core.ir.parser import parse_file
    from cake_core.loop import reduce as reducing
    from cake_core.loop import reproduces
    from cake_core.paths import output_file, write_text

    if args.output:
        output_file(args.output)
    if not args.deadline > 0:
        raise CakeUserError(f"--deadline must be a positive number of seconds, not {args.deadline}")
    reg = _registry()
    target = reg.get("targets", args.target)
    problem = reg.get("problems", args.problem) if args.problem is not None else None
    code = args.code.strip().upper()
    explanation_of(code)  # an unknown code is bad input
    try:
        text = parse_file(args.file)[1]
    except DiagnosticError:  # it was read but does not parse: it is reduced line by line
        text = Path(args.file).read_text()
    still_fails = reproduces.predicate_for(text, code, target, reg, problem)
    if still_fails is None:
        where = f"verifying {args.file} for `{target.name}`"
        if problem is not None:
            where += f" or running it in the interpreter with the oracle of `{problem.name}`"
        raise reducing.NotReproduced(f"{code} does not fire: {where} does not report it")
    result = reducing.reduce(text, still_fails, deadline_s=args.deadline)
    if args.output:
        write_text(output_file(args.output), result.text)
    else:
        sys.stdout.write(result.text)
    sys.stderr.write(f"{args.file}: {code}: {result.summary()}\n")
    return 0


# ---------------------------------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cake", description="Cake: evolve GPU kernels in a typed, hardware-explicit IR.")
    p.add_argument("--version", action="version", version=f"cake {__version__}")
    p.add_argument("--log-format", choices=("console", "json"), default="console")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="warning")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("plugins", help="list loaded plugins and what each registered")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_plugins)

    s = sub.add_parser("targets", help="list hardware targets")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=cmd_targets)

    s = sub.add_parser("verify", help="type-check a .cake file and run every verifier rule for a target")
    s.add_argument("file", metavar="FILE.cake")
    s.add_argument("--target", required=True, metavar="T", help="a target id (see `cake targets`)")
    s.add_argument("--problem", metavar="P", help="then run the file in the interpreter with the oracle of "
                   "problem P, on ragged shapes and shapes where every ring wraps (see `cake problems`)")  # fmt: skip
    s.add_argument("--json", action="store_true", help="diagnostics as a JSON list")
    s.set_defaults(handler=cmd_verify)

    from cake_core.commands import add_commands

    add_commands(sub)

    s = sub.add_parser("reduce", help="shrink a .cake file to a minimal one that still reports a diagnostic code")
    s.add_argument("file", metavar="FILE.cake")
    s.add_argument("--target", required=True, metavar="T", help="a target id (see `cake targets`)")
    s.add_argument("--code", required=True, metavar="CODE", help="the diagnostic code to keep (see `cake explain`)")
    s.add_argument("--problem", metavar="P", help="where verifying does not report CODE: the interpreter gate "
                   "with the oracle of problem P must (as `cake verify --problem`)")  # fmt: skip
    s.add_argument("-o", "--output", metavar="OUT", help="write the reduced file here (default: stdout)")
    s.add_argument("--deadline", type=float, default=60.0, metavar="S", help="stop after S seconds (default: 60)")
    s.set_defaults(handler=cmd_reduce)

    s = sub.add_parser("explain", help="print the documentation of a diagnostic code or verifier rule")
    s.add_argument("code", metavar="RULE_ID")
    s.set_defaults(handler=cmd_explain)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from cake_core import gcpolicy, logs

    gcpolicy.configure()

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        logs.configure(args.log_format, args.log_level)
        if not getattr(args, "handler", None):
            parser.print_help(sys.stderr)
            return 2
        return args.handler(args)
    except CakeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        if os.environ.get("CAKE_DEBUG"):
            raise
        return getattr(exc, "exit_code", 2)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # our bug: say so plainly, keep the traceback behind CAKE_DEBUG
        if os.environ.get("CAKE_DEBUG"):
            raise
        sys.stderr.write(
            f"internal error: {type(exc).__name__}: {exc} (this is a bug in Cake; "
            f"rerun with CAKE_DEBUG=1 for a traceback)\n"
        )
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
