"""The sizes of one interpreter run: the multiprocessor count ``SMS`` a persistent grid sees."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module
from cake_core.semantics import DEFAULT_SMS, run_program

# one CTA per multiprocessor, at most one per element: the CTAs a run makes count `SMS`
PERSISTENT = """
kernel persistent(y: global f32[N])
  domain N >= 1
  grid (w) over (min(SMS, N))
  cta warps 1
  role r warps 0..1:
    reg v: f32[1] layout rows
    fill v, value=1.0
    store y[w : +1] <- v
"""
Y = np.zeros(200, np.float32)


def test_without_a_target_the_run_chooses_sms(compile_cake) -> None:
    checked = compile_cake(PERSISTENT, "persistent.cake")
    assert run_program(checked, {"y": Y}, {}, sms=3).ctas == 3
    assert run_program(checked, {"y": Y}, {"SMS": 5}).ctas == 5
    assert run_program(checked, {"y": Y}, {}).ctas == DEFAULT_SMS
    assert run_program(checked, {"y": Y}, {}, sms=7).outputs["y"].sum() == 7.0


def test_with_a_target_sms_is_the_targets_and_another_is_refused(primitives) -> None:
    h200 = plugins.registry().get("targets", "h200")
    checked = check_module(parse(PERSISTENT, "persistent.cake"), primitives, h200)
    assert checked.ok
    assert run_program(checked, {"y": Y}, {}).ctas == h200.sm_count
    assert run_program(checked, {"y": Y}, {}, sms=h200.sm_count).ctas == h200.sm_count
    with pytest.raises(ValueError, match=rf"SMS=3, .* target with SMS={h200.sm_count} ") as exc:
        run_program(checked, {"y": Y}, {}, sms=3)
    assert "without a target" in str(exc.value)
    with pytest.raises(ValueError, match=rf"SMS=5, .* SMS={h200.sm_count} "):
        run_program(checked, {"y": Y}, {"SMS": 5})
