"""Compile CUDA C++ to cubin with NVRTC (``cuda.bindings.nvrtc``), with a resource report and a disk cache.

No GPU, driver or nvcc is needed: NVRTC from the ``nvidia-cuda-nvrtc`` wheel compiles for any supported
architecture on any machine. Generated sources include no CUDA headers (the wheel ships no
``cuda_bf16.h``); bf16 values travel as 16-bit patterns.

Every compile passes ``--gpu-architecture=<arch> -std=c++17 --ptxas-options=-v -lineinfo`` followed by
the caller's options, and returns a :class:`CompileResult`: the cubin, the PTX, the full log, the
NVRTC version, the options, the wall time, a parsed resource report per function (registers, spills,
stack frame, static shared memory, constant banks, barriers) and the compiler's advisory messages as
structured findings (an ignored ``setmaxnreg`` is a finding, not noise). A failed compile raises
:class:`CompileError` carrying the log and its first error line.

Cache: successful compiles are stored under ``$CAKE_CACHE_DIR/nvrtc`` (default ``~/.cache/cake/nvrtc``),
keyed by the sha256 of (source, file name, architecture, sorted options, NVRTC version, Cake version).
The file name is part of the key because ``-lineinfo`` embeds it in the cubin. ``CAKE_NO_CACHE=1`` or
``cache=False`` bypasses the cache; an unreadable or inconsistent entry is ignored and rewritten.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path

import attrs

from cake_core.errors import CakeUserError
from cake_core.runtime.ptxas import CompileWarning, FunctionResources, parse_ptxas_log

__all__ = [
    "BASE_OPTIONS",
    "SUPPORTED_ARCHS",
    "CompileError",
    "CompileResult",
    "NvrtcUnavailableError",
    "cache_dir",
    "cache_key",
    "compile_cuda",
    "nvrtc_version",
]

#: Architectures Cake targets (NVRTC accepts others; these are the ones tested).
SUPPORTED_ARCHS: tuple[str, ...] = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a")

#: Options every compile passes after ``--gpu-architecture``.
BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", "--ptxas-options=-v", "-lineinfo")

_CACHE_FORMAT = 1
_ARCH_RE = re.compile(r"^sm_\d+[af]?$")
_FIRST_ERROR = re.compile(r"\berror\b", re.IGNORECASE)


class CompileError(CakeUserError):
    """NVRTC rejected the source (or an option). Carries the full log and its first error line."""

    def __init__(self, *, name: str, arch: str, log: str, first_error: str, options: Sequence[str]) -> None:
        self.name, self.arch, self.log, self.first_error = name, arch, log, first_error
        self.options = tuple(options)
        super().__init__(f"NVRTC compile of {name} for {arch} failed: {first_error}")


class NvrtcUnavailableError(CakeUserError):
    """``cuda.bindings.nvrtc`` cannot be imported or cannot load libnvrtc."""


@attrs.frozen
class CompileResult:
    """One successful NVRTC compile (or its cached copy).

    ``compile_s`` is the NVRTC wall time of the compile that produced the cubin (for a cache hit, the
    original compile); ``wall_s`` is the time this call took. ``cache_status`` is ``hit``, ``miss``
    (compiled and stored), ``corrupt`` (an unreadable entry was replaced) or ``off`` (bypassed).
    ``functions`` holds every function ptxas reported; :attr:`kernels` only the entry points.
    """

    name: str
    arch: str
    options: tuple[str, ...]
    cubin: bytes = attrs.field(repr=lambda b: f"<{len(b)} bytes>")
    ptx: str = attrs.field(repr=False)
    log: str = attrs.field(repr=False)
    nvrtc_version: tuple[int, int]
    compile_s: float
    wall_s: float
    cache_status: str
    cache_key: str
    functions: dict[str, FunctionResources] = attrs.field(eq=False)
    warnings: tuple[CompileWarning, ...]
    global_bytes: int | None = None

    @property
    def cache_hit(self) -> bool:
        return self.cache_status == "hit"

    @property
    def kernels(self) -> dict[str, FunctionResources]:
        """Resources of the entry (``__global__``) functions, by name."""
        return {n: f for n, f in self.functions.items() if f.is_entry}

    def kernel(self, name: str) -> FunctionResources:
        """Resources of entry function ``name`` (``KeyError`` naming the known kernels otherwise)."""
        k = self.kernels
        if name not in k:
            raise KeyError(f"no kernel `{name}` in {self.name} (kernels: {', '.join(sorted(k)) or 'none'})")
        return k[name]

    def findings(self, kind: str) -> tuple[CompileWarning, ...]:
        """The advisory messages of one ``kind`` (e.g. ``setmaxnreg_ignored``)."""
        return tuple(w for w in self.warnings if w.kind == kind)

    @property
    def setmaxnreg_ignored(self) -> bool:
        """ptxas ignored a ``setmaxnreg`` (the kernel has no register cap at entry)."""
        return bool(self.findings("setmaxnreg_ignored"))


def _nvrtc():  # noqa: ANN202 - the module object of cuda.bindings.nvrtc
    try:
        from cuda.bindings import nvrtc
    except Exception as e:  # ImportError, or a failure to load libnvrtc
        raise NvrtcUnavailableError(f"NVRTC is not available (pip install nvidia-cuda-nvrtc): {e}") from None
    return nvrtc


def _check(result: tuple, what: str):  # noqa: ANN202 - value(s) of a cuda.bindings call
    nvrtc = _nvrtc()
    err, *values = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcUnavailableError(f"{what} failed: {getattr(err, 'name', err)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@cache
def nvrtc_version() -> tuple[int, int]:
    """The (major, minor) version of the NVRTC library that compiles."""
    try:
        major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    except NvrtcUnavailableError:
        raise
    except Exception as e:  # libnvrtc missing or unloadable
        raise NvrtcUnavailableError(f"NVRTC is not available (pip install nvidia-cuda-nvrtc): {e}") from None
    return int(major), int(minor)


def _cake_version() -> str:
    from cake_core import __version__

    return __version__


def cache_dir() -> Path:
    """Where compiled cubins are cached: ``$CAKE_CACHE_DIR/nvrtc``, default ``~/.cache/cake/nvrtc``."""
    root = os.environ.get("CAKE_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "nvrtc"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "cake" / "nvrtc"


def cache_key(source: str, arch: str, options: Iterable[str], *, name: str = "cake.cu") -> str:
    """The cache key of a compile: sha256 over source, name, arch, sorted options and versions."""
    payload = {
        "source": source,
        "name": name,
        "arch": arch,
        "options": sorted(options),
        "nvrtc": list(nvrtc_version()),
        "cake": _cake_version(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _cache_disabled() -> bool:
    return os.environ.get("CAKE_NO_CACHE", "").strip().lower() not in ("", "0", "false", "no")


def _full_options(arch: str, options: Iterable[str]) -> tuple[str, ...]:
    if not isinstance(arch, str) or not _ARCH_RE.match(arch):
        raise CakeUserError(f"bad GPU architecture `{arch}` (expected e.g. {', '.join(SUPPORTED_ARCHS)})")
    extra = tuple(options)
    for opt in extra:
        if not isinstance(opt, str):
            raise CakeUserError(f"NVRTC options must be strings, got {opt!r}")
        if opt.startswith(("--gpu-architecture", "-arch")):
            raise CakeUserError(f"pass the architecture as `arch`, not as option `{opt}`")
    return (f"--gpu-architecture={arch}", *BASE_OPTIONS, *extra)


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if _FIRST_ERROR.search(line):
            return line.strip()
    stripped = [line.strip() for line in log.splitlines() if line.strip()]
    return stripped[0] if stripped else "NVRTC reported a failure with an empty log"


def _get_text(nvrtc, prog, size_fn, get_fn, what: str) -> bytes:  # noqa: ANN001
    size = _check(size_fn(prog), f"{what} size")
    buf = b" " * int(size)
    _check(get_fn(prog, buf), what)
    return buf


def _nvrtc_compile(source: str, name: str, options: tuple[str, ...], arch: str) -> tuple[bytes, str, str, float]:
    """Run NVRTC; returns (cubin, ptx, log, seconds). Raises CompileError on failure."""
    nvrtc = _nvrtc()
    t0 = time.perf_counter()
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in options]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _get_text(nvrtc, prog, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, "program log")
        log_text = log.rstrip(b"\x00").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            first = _first_error(log_text)
            if not log_text.strip():
                first = f"{getattr(status, 'name', status)}"
            raise CompileError(name=name, arch=arch, log=log_text, first_error=first, options=options)
        cubin = _get_text(nvrtc, prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, "cubin")
        try:
            ptx = _get_text(nvrtc, prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, "PTX")
            ptx_text = ptx.rstrip(b"\x00").decode(errors="replace")
        except NvrtcUnavailableError:
            ptx_text = ""
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return bytes(cubin), ptx_text, log_text, time.perf_counter() - t0


# ----------------------------------------------------------------------------------------------- cache


def _entry_path(directory: Path, key: str) -> Path:
    return directory / key[:2] / f"{key}.json"


def _read_entry(path: Path, key: str) -> dict | None:
    """The cache entry at ``path``; None if absent. Raises ValueError if it exists but is corrupt."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"unreadable: {e}") from None
    try:
        entry = json.loads(raw)
        if entry.get("format") != _CACHE_FORMAT or entry.get("key") != key:
            raise ValueError("format or key mismatch")
        cubin = base64.b64decode(entry["cubin_b64"], validate=True)
        if hashlib.sha256(cubin).hexdigest() != entry["cubin_sha256"] or not cubin:
            raise ValueError("cubin checksum mismatch")
        entry["cubin"] = cubin
        for field in ("log", "ptx", "name", "arch"):
            if not isinstance(entry[field], str):
                raise ValueError(f"bad field {field}")
        entry["compile_s"] = float(entry["compile_s"])
        entry["options"] = [str(o) for o in entry["options"]]
        entry["nvrtc_version"] = [int(v) for v in entry["nvrtc_version"]]
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
        raise ValueError(str(e)) from None
    return entry


def _write_entry(path: Path, entry: dict) -> None:
    """Write atomically (temp file + rename); a cache that cannot be written is skipped quietly."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        from cake_core.logs import get_logger

        get_logger("cake.nvrtc").warning("nvrtc cache not written", path=str(path), error=str(e))


# ----------------------------------------------------------------------------------------------- public


def compile_cuda(
    source: str,
    arch: str,
    *,
    name: str = "cake.cu",
    options: Iterable[str] = (),
    cache: bool = True,
    cache_directory: Path | str | None = None,
) -> CompileResult:
    """Compile header-free CUDA C++ ``source`` to a cubin for ``arch`` (e.g. ``sm_90a``).

    ``options`` are extra NVRTC options (``-maxrregcount=64``, ``-DTILE=128``, ...), appended after
    the fixed ones. ``cache_directory`` overrides :func:`cache_dir`. Raises :class:`CompileError`
    when NVRTC rejects the source or an option, :class:`NvrtcUnavailableError` when NVRTC is missing,
    and :class:`~cake_core.errors.CakeUserError` for a malformed ``arch``.
    """
    t0 = time.perf_counter()
    full = _full_options(arch, options)
    version = nvrtc_version()
    key = cache_key(source, arch, full, name=name)
    use_cache = cache and not _cache_disabled()
    status = "off"
    path: Path | None = None
    if use_cache:
        directory = Path(cache_directory).expanduser() if cache_directory is not None else cache_dir()
        path = _entry_path(directory, key)
        try:
            entry = _read_entry(path, key)
            status = "miss"
        except ValueError:
            entry, status = None, "corrupt"
        if entry is not None:
            report = parse_ptxas_log(entry["log"])
            return CompileResult(
                name=name,
                arch=arch,
                options=full,
                cubin=entry["cubin"],
                ptx=entry["ptx"],
                log=entry["log"],
                nvrtc_version=version,
                compile_s=entry["compile_s"],
                wall_s=time.perf_counter() - t0,
                cache_status="hit",
                cache_key=key,
                functions=report.functions,
                warnings=report.warnings,
                global_bytes=report.global_bytes,
            )
    cubin, ptx, log, seconds = _nvrtc_compile(source, name, full, arch)
    if path is not None:
        _write_entry(
            path,
            {
                "format": _CACHE_FORMAT,
                "key": key,
                "name": name,
                "arch": arch,
                "options": list(full),
                "nvrtc_version": list(version),
                "cake_version": _cake_version(),
                "compile_s": seconds,
                "created": time.time(),
                "log": log,
                "ptx": ptx,
                "cubin_sha256": hashlib.sha256(cubin).hexdigest(),
                "cubin_b64": base64.b64encode(cubin).decode(),
            },
        )
    report = parse_ptxas_log(log)
    return CompileResult(
        name=name,
        arch=arch,
        options=full,
        cubin=cubin,
        ptx=ptx,
        log=log,
        nvrtc_version=version,
        compile_s=seconds,
        wall_s=time.perf_counter() - t0,
        cache_status=status,
        cache_key=key,
        functions=report.functions,
        warnings=report.warnings,
        global_bytes=report.global_bytes,
    )
