"""Disassemble cubins with ``cuobjdump -sass`` and check which machine instructions are really there.

A schedule that claims tensor-core MMAs, asynchronous copies or TMA must show them in the SASS:
HMMA (mma.sync), HGMMA (wgmma), LDGSTS (cp.async), UTMALDG (TMA load), LDSM (ldmatrix), SYNCS
(mbarrier operations). :func:`check_claims` answers that question without a GPU.

The tools come from PATH or from the ``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm`` wheels
(``site-packages/nvidia/cu13/bin``); cuobjdump runs with nvdisasm's directory on PATH and
``NVDISASM_PATH`` set. When they are missing, :func:`check_claims` says so in its finding instead of
raising; :func:`disassemble` raises :class:`SassToolError`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import attrs

from cake_core.errors import CakeUserError

__all__ = [
    "SassFinding",
    "SassToolError",
    "check_claims",
    "disassemble",
    "find_tool",
    "full_opcode_counts",
    "opcode_counts",
    "split_functions",
    "tool_version",
]

_WHEEL_BIN_DIRS = ("nvidia/cu13/bin", "nvidia/cu12/bin", "nvidia/cuda_cuobjdump/bin", "nvidia/cuda_nvdisasm/bin")

# One SASS instruction line: /*0120*/  [@[!]Pn] OPCODE[.MODS] operands ;  /* encoding */
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s+(?:@!?U?P[0-9T]+\s+)?(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(?P<name>\S+)")


class SassToolError(CakeUserError):
    """cuobjdump is missing or could not disassemble the cubin."""


def _site_dirs() -> list[Path]:
    dirs: list[Path] = []
    for entry in sys.path:
        if entry and entry.endswith(("site-packages", "dist-packages")):
            dirs.append(Path(entry))
    try:
        import nvidia  # namespace package of the NVIDIA wheels

        for p in getattr(nvidia, "__path__", []):
            dirs.append(Path(p).parent)
    except ImportError:
        pass
    return dirs


@cache
def find_tool(name: str) -> str | None:
    """Absolute path of ``cuobjdump`` / ``nvdisasm``: PATH first, then the NVIDIA wheels; None if absent."""
    found = shutil.which(name)
    if found:
        return found
    for site in _site_dirs():
        for sub in _WHEEL_BIN_DIRS:
            candidate = site / sub / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def _tool_env() -> dict[str, str]:
    env = dict(os.environ)
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm:
        env["NVDISASM_PATH"] = nvdisasm
        env["PATH"] = os.pathsep.join([str(Path(nvdisasm).parent), env.get("PATH", "")])
    return env


@cache
def tool_version() -> str | None:
    """cuobjdump's version line (e.g. ``Cuda compilation tools, release 13.5, V13.5.37``), None if absent."""
    tool = find_tool("cuobjdump")
    if tool is None:
        return None
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30, env=_tool_env())
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if "release" in line]
    return lines[0] if lines else (out.stdout.strip().splitlines() or [None])[-1]


def disassemble(cubin: bytes, *, timeout_s: float = 120.0) -> str:
    """The SASS listing of ``cubin`` (cuobjdump -sass). Raises :class:`SassToolError` on failure."""
    tool = find_tool("cuobjdump")
    if tool is None:
        raise SassToolError("cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    with tempfile.TemporaryDirectory(prefix="cake-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            out = subprocess.run(
                [tool, "-sass", str(path)], capture_output=True, text=True, timeout=timeout_s, env=_tool_env()
            )
        except subprocess.TimeoutExpired:
            raise SassToolError(f"cuobjdump took longer than {timeout_s:.0f} s") from None
        except OSError as e:
            raise SassToolError(f"cuobjdump could not run: {e}") from None
    if out.returncode != 0:
        msg = (out.stderr or out.stdout).strip().splitlines()
        raise SassToolError(f"cuobjdump failed: {msg[0] if msg else f'exit status {out.returncode}'}")
    return out.stdout


def _instructions(sass: str) -> Iterable[str]:
    for line in sass.splitlines():
        m = _INSTRUCTION.match(line)
        if m:
            yield m["op"]


def opcode_counts(sass: str) -> Counter[str]:
    """Count instructions by mnemonic with modifiers stripped (``HMMA.16816.F32.BF16`` -> ``HMMA``)."""
    return Counter(op.split(".", 1)[0] for op in _instructions(sass))


def full_opcode_counts(sass: str) -> Counter[str]:
    """Count instructions by full opcode with modifiers (``LDG.E.128``, ``HGMMA.64x128x16.F32.BF16``)."""
    return Counter(_instructions(sass))


def split_functions(sass: str) -> dict[str, str]:
    """The listing cut into one piece per ``Function : name`` section."""
    pieces: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in sass.splitlines():
        m = _FUNCTION.match(line)
        if m:
            current = pieces.setdefault(m["name"], [])
            continue
        if current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in pieces.items()}


@attrs.frozen
class SassFinding:
    """Which claimed instructions the SASS contains.

    A claim without a dot (``HMMA``) matches the mnemonic; a claim with modifiers (``LDG.E.128``)
    matches instructions whose full opcode starts with it. ``available`` is False when cuobjdump is
    missing or failed (``error`` says why); then nothing is known about presence.
    """

    available: bool
    claims: tuple[str, ...]
    present: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    counts: dict[str, int] = attrs.field(factory=dict, eq=False)  # per claim
    opcodes: dict[str, int] = attrs.field(factory=dict, eq=False)  # every mnemonic in the listing
    function: str | None = None
    tool: str | None = None
    tool_version: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Every claim was checked and found."""
        return self.available and not self.missing


def _count_claim(claim: str, mnemonics: Counter[str], full: Counter[str]) -> int:
    if "." not in claim:
        return mnemonics.get(claim, 0)
    return sum(n for op, n in full.items() if op == claim or op.startswith(claim + "."))


def check_claims(cubin: bytes, claims: Iterable[str], *, function: str | None = None) -> SassFinding:
    """Check that each claimed mnemonic occurs in the SASS of ``cubin`` (of one ``function`` if given).

    Never raises for a missing or failing tool: the finding then has ``available=False`` and ``error``.
    """
    wanted = tuple(dict.fromkeys(c.strip().upper() if "." not in c else c.strip() for c in claims))
    tool = find_tool("cuobjdump")
    if tool is None:
        return SassFinding(
            available=False,
            claims=wanted,
            function=function,
            error="cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)",
        )
    try:
        sass = disassemble(cubin)
    except SassToolError as e:
        return SassFinding(
            available=False, claims=wanted, function=function, tool=tool, tool_version=tool_version(), error=str(e)
        )
    if function is not None:
        pieces = split_functions(sass)
        if function not in pieces:
            return SassFinding(
                available=False,
                claims=wanted,
                function=function,
                tool=tool,
                tool_version=tool_version(),
                error=f"no function `{function}` in the cubin (functions: {', '.join(sorted(pieces)) or 'none'})",
            )
        sass = pieces[function]
    mnemonics = opcode_counts(sass)
    full = full_opcode_counts(sass)
    counts = {c: _count_claim(c, mnemonics, full) for c in wanted}
    return SassFinding(
        available=True,
        claims=wanted,
        present=tuple(c for c in wanted if counts[c] > 0),
        missing=tuple(c for c in wanted if counts[c] == 0),
        counts=counts,
        opcodes=dict(sorted(mnemonics.items())),
        function=function,
        tool=tool,
        tool_version=tool_version(),
    )
