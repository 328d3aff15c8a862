"""Human rendering of diagnostics in the manner of rustc (their JSON form is a rule of :mod:`cake_core.convert`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cake_core.diagnostics.diagnostic import Diagnostic, Label, Severity


def _gutter_width(diags: Iterable[Diagnostic]) -> int:
    lines = [d.primary.line for d in diags] + [s.loc.line for d in diags for s in d.secondary]
    return max([len(str(n)) for n in lines] + [1])


def _snippet(lines: list[str], loc, label: str, mark: str, width: int) -> list[str]:
    if not (1 <= loc.line <= len(lines)):
        return []
    text = lines[loc.line - 1].rstrip("\n")
    start = max(loc.col, 1)
    end = loc.end_col if loc.end_line == loc.line and loc.end_col > start else len(text) + 1
    end = max(end, start + 1)
    pad = " " * width
    carets = " " * (start - 1) + mark * (end - start)
    out = [f"{loc.line:>{width}} | {text}", f"{pad} | {carets}" + (f" {label}" if label else "")]
    return out


def render(diag: Diagnostic, sources: Mapping[str, str]) -> str:
    """One diagnostic as text: header, location arrow, source line with carets, notes, help."""
    width = _gutter_width([diag])
    pad = " " * width
    out = [f"{diag.severity.value}[{diag.code}]: {diag.message}", f"{pad}--> {diag.primary}"]
    src = sources.get(diag.primary.file)
    lines = src.splitlines() if src is not None else []
    snippet = _snippet(lines, diag.primary, diag.label, "^", width)
    if snippet:
        out.append(f"{pad} |")
        out.extend(snippet)
    for sec in diag.secondary:
        sec_src = sources.get(sec.loc.file)
        sec_lines = sec_src.splitlines() if sec_src is not None else []
        if sec.loc.file != diag.primary.file:
            out.append(f"{pad}::: {sec.loc}")
        sn = _snippet(sec_lines, sec.loc, sec.message, "-", width)
        if sn:
            out.append(f"{pad} |")
            out.extend(sn)
        else:
            out.append(f"{pad} = note: {sec.loc}: {sec.message}")
    if diag.notes or diag.help:
        out.append(f"{pad} |")
    for note in diag.notes:
        out.append(f"{pad} = note: {note}")
    if diag.help:
        out.append(f"{pad} = help: {diag.help}")
    return "\n".join(out)


def render_all(diags: Iterable[Diagnostic], sources: Mapping[str, str]) -> str:
    diags = list(diags)
    parts = [render(d, sources) for d in diags]
    errors = sum(d.severity is Severity.ERROR for d in diags)
    warnings = sum(d.severity is Severity.WARNING for d in diags)
    summary = []
    if errors:
        summary.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        summary.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    if summary:
        parts.append(" and ".join(summary) + " emitted")
    return "\n\n".join(parts)


__all__ = ["Label", "render", "render_all"]
