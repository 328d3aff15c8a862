"""Parsing of ptxas -v logs, including formats other than the installed NVRTC's."""

from __future__ import annotations

from cake_core.runtime.ptxas import classify_warning, parse_ptxas_log

OLD_STYLE = """\
x.cu(3): warning #177-D: variable "t" was declared but never referenced

ptxas info    : 8 bytes gmem, 16 bytes cmem[4]
ptxas info    : Compiling entry function 'k1' for 'sm_80'
ptxas info    : Function properties for k1
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, 384 bytes cmem[0], 4 bytes cmem[2], 16 bytes lmem, 2048 bytes smem
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas warning : Stack size for entry function 'k1' cannot be statically determined
ptxas info    : Compiling entry function 'k2' for 'sm_80'
ptxas info    : Function properties for k2
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 360 bytes cmem[0]
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'k2'.
ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.
ptxas info    : (C9999) Potential Performance Loss: something new.
ptxas info    : Compile time = 1.0 ms
\x00
"""


def test_parses_functions_and_fields() -> None:
    report = parse_ptxas_log(OLD_STYLE)
    assert list(report.functions) == ["k1", "_Z6helperPfi", "k2"]
    k1 = report.functions["k1"]
    assert k1.is_entry and k1.arch == "sm_80"
    assert (k1.registers, k1.stack_frame, k1.spill_stores, k1.spill_loads) == (255, 24, 8, 12)
    assert k1.spills and k1.shared_static == 2048 and k1.local_bytes == 16
    assert k1.constant == {0: 384, 2: 4} and k1.constant_bytes == 388
    assert k1.barriers is None  # this ptxas did not say
    helper = report.functions["_Z6helperPfi"]
    assert not helper.is_entry and helper.stack_frame == 32 and helper.registers is None
    k2 = report.functions["k2"]
    assert (k2.registers, k2.barriers, k2.constant) == (12, 1, {0: 360})
    assert report.global_bytes == 8


def test_classifies_warnings() -> None:
    report = parse_ptxas_log(OLD_STYLE)
    kinds = [(w.source, w.kind, w.code, w.function) for w in report.warnings]
    assert kinds == [
        ("nvrtc", "nvrtc_warning", "177-D", None),
        ("ptxas", "stack_size_unknown", None, "k1"),
        ("ptxas", "wgmma_serialized", "C7515", "k2"),
        ("ptxas", "setmaxnreg_ignored", "C7508", None),
        ("ptxas", "performance", "C9999", None),
    ]
    assert classify_warning("Register allocation failed") == "ptxas_warning"


def test_empty_and_unrelated_logs() -> None:
    assert parse_ptxas_log("").functions == {}
    report = parse_ptxas_log("nvrtc: some chatter\n\x00\x00")
    assert report.functions == {} and report.warnings == () and report.global_bytes is None
