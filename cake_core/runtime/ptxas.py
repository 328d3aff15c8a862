"""Parse the resource report and the advisory messages that ``ptxas -v`` writes into the NVRTC log.

NVRTC compiles with ``--ptxas-options=-v``; ptxas then prints, for every function, lines such as::

    ptxas info    : Compiling entry function 'spill' for 'sm_90a'
    ptxas info    : Function properties for spill
    ptxas         .     1072 bytes stack frame, 1196 bytes spill stores, 1340 bytes spill loads
    ptxas info    : Used 32 registers, used 0 barriers, 1072 bytes cumulative stack size, 128 bytes smem
    ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine ...

:func:`parse_ptxas_log` turns these into one :class:`FunctionResources` per function (entry kernels and
non-inlined device functions) and a list of :class:`CompileWarning` findings. Advisory messages matter:
an ignored ``setmaxnreg`` or serialized ``wgmma`` silently costs a warp-specialized kernel most of its
speed, so they are classified (``kind``) rather than left in the log as noise.

Newer ptxas versions do not print ``cmem`` usage for every architecture (sm_90 omits it); such fields
are then empty, never guessed.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["CompileWarning", "FunctionResources", "PtxasReport", "parse_ptxas_log"]


@attrs.frozen
class FunctionResources:
    """Resources ptxas reports for one function (all sizes in bytes).

    ``is_entry`` distinguishes ``__global__`` kernels from non-inlined device functions, which only
    have a stack line. ``registers`` and ``barriers`` are ``None`` where ptxas printed no such line.
    ``constant`` maps a constant bank number to its bytes (``cmem[0]`` is the kernel parameter bank).
    """

    name: str
    is_entry: bool
    arch: str | None = None
    registers: int | None = None
    barriers: int | None = None
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cumulative_stack: int | None = None
    shared_static: int = 0
    local_bytes: int = 0
    constant: dict[int, int] = attrs.field(factory=dict, eq=False)

    @property
    def spills(self) -> bool:
        """Whether ptxas spilled registers to local memory."""
        return self.spill_stores > 0 or self.spill_loads > 0

    @property
    def constant_bytes(self) -> int:
        """Bytes over all reported constant banks (0 where ptxas reported none)."""
        return sum(self.constant.values())


@attrs.frozen
class CompileWarning:
    """An advisory message from the compiler, as a structured finding.

    ``source`` is ``ptxas`` or ``nvrtc`` (the C++ front end). ``kind`` classifies it:
    ``setmaxnreg_ignored``, ``wgmma_serialized``, ``stack_size_unknown``, ``performance`` (any other
    "Potential Performance Loss"), ``ptxas_warning`` or ``nvrtc_warning``. ``code`` is the compiler's
    own id (``C7508``, ``177-D``) where it gave one; ``function`` the function it names, if any.
    """

    source: str
    kind: str
    message: str
    code: str | None = None
    function: str | None = None
    line: str = ""


@attrs.frozen
class PtxasReport:
    """Everything parsed out of one compile log."""

    functions: dict[str, FunctionResources] = attrs.field(eq=False)
    warnings: tuple[CompileWarning, ...]
    global_bytes: int | None = None  # module-level ``N bytes gmem`` (__device__ variables)


_ENTRY = re.compile(r"^ptxas\s+info\s*:\s*Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPS = re.compile(r"^ptxas\s+info\s*:\s*Function properties for (?P<name>\S+)")
_STACK = re.compile(
    r"^ptxas\s+\.\s+(?P<frame>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, "
    r"(?P<loads>\d+) bytes spill loads"
)
_USED = re.compile(r"^ptxas\s+info\s*:\s*Used (?P<regs>\d+) registers(?P<rest>.*)$")
_GMEM = re.compile(r"^ptxas\s+info\s*:\s*(?P<bytes>\d+) bytes gmem")
_MESSAGE = re.compile(r"^ptxas\s+(?P<level>info|warning)\s*:\s*(?:\((?P<code>C\d+)\)\s*)?(?P<msg>.*)$")
_NVRTC_WARNING = re.compile(r"^(?P<file>.+?)\((?P<lineno>\d+)\): warning(?: #(?P<code>[\w-]+))?: (?P<msg>.*)$")
_NAMED_FUNCTION = re.compile(r"function '(?P<name>[^']+)'")
_ITEM_BARRIERS = re.compile(r"used (\d+) barriers")
_ITEM_SMEM = re.compile(r"(\d+) bytes smem")
_ITEM_LMEM = re.compile(r"(\d+) bytes lmem")
_ITEM_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
_ITEM_CUMULATIVE = re.compile(r"(\d+) bytes cumulative stack size")


def classify_warning(message: str) -> str:
    """The ``kind`` of a ptxas advisory message (see :class:`CompileWarning`)."""
    low = message.lower()
    if "setmaxnreg" in low and "ignored" in low:
        return "setmaxnreg_ignored"
    if "wgmma" in low and "serializ" in low:
        return "wgmma_serialized"
    if "stack size" in low and "cannot be statically determined" in low:
        return "stack_size_unknown"
    if "performance loss" in low:
        return "performance"
    return "ptxas_warning"


def parse_ptxas_log(log: str) -> PtxasReport:
    """Parse an NVRTC program log (with ``ptxas -v`` output) into resources and warnings.

    Lines that are neither resource lines nor messages are ignored, so a log without ``-v`` output
    parses to an empty report.
    """
    functions: dict[str, dict[str, object]] = {}
    order: list[str] = []
    warnings: list[CompileWarning] = []
    global_bytes: int | None = None
    current_entry: str | None = None
    props_target: str | None = None

    def record(name: str) -> dict[str, object]:
        if name not in functions:
            functions[name] = {"name": name, "is_entry": False}
            order.append(name)
        return functions[name]

    for raw in log.splitlines():
        line = raw.rstrip("\x00").rstrip()
        if not line:
            continue
        if m := _ENTRY.match(line):
            current_entry = m["name"]
            rec = record(current_entry)
            rec["is_entry"] = True
            rec["arch"] = m["arch"]
            continue
        if m := _PROPS.match(line):
            props_target = m["name"]
            record(props_target)
            continue
        if m := _STACK.match(line):
            if props_target is not None:
                rec = record(props_target)
                rec["stack_frame"] = int(m["frame"])
                rec["spill_stores"] = int(m["stores"])
                rec["spill_loads"] = int(m["loads"])
            continue
        if m := _USED.match(line):
            if current_entry is not None:
                rec = record(current_entry)
                rec["registers"] = int(m["regs"])
                rest = m["rest"]
                if b := _ITEM_BARRIERS.search(rest):
                    rec["barriers"] = int(b[1])
                if s := _ITEM_SMEM.search(rest):
                    rec["shared_static"] = int(s[1])
                if lm := _ITEM_LMEM.search(rest):
                    rec["local_bytes"] = int(lm[1])
                if c := _ITEM_CUMULATIVE.search(rest):
                    rec["cumulative_stack"] = int(c[1])
                rec["constant"] = {int(bank): int(nbytes) for nbytes, bank in _ITEM_CMEM.findall(rest)}
            continue
        if m := _GMEM.match(line):
            global_bytes = int(m["bytes"])
            continue
        if m := _MESSAGE.match(line):
            level, code, msg = m["level"], m["code"], m["msg"].strip()
            if level == "warning" or code is not None:
                fn = _NAMED_FUNCTION.search(msg)
                warnings.append(
                    CompileWarning(
                        source="ptxas",
                        kind=classify_warning(msg),
                        message=msg,
                        code=code,
                        function=fn["name"] if fn else None,
                        line=line,
                    )
                )
            continue
        if m := _NVRTC_WARNING.match(line):
            warnings.append(
                CompileWarning(
                    source="nvrtc",
                    kind="nvrtc_warning",
                    message=m["msg"].strip(),
                    code=m["code"],
                    function=None,
                    line=line,
                )
            )
    resources = {name: FunctionResources(**functions[name]) for name in order}  # type: ignore[arg-type]
    return PtxasReport(functions=resources, warnings=tuple(warnings), global_bytes=global_bytes)
