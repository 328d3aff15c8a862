"""A GPU-free worker backend that behaves as the file named by ``$CAKE_TEST_GPU_SCRIPT`` says, run by run.

It stands in for the GPU where a test drives stage 3's defences through the real worker machinery
without one. The file holds one word, read at every run (so a test can change it between runs):

- ``honest``: kmeans-assign's right answer (the numpy reference), every timed sample 1 ms;
- ``flaky``: the right answer with its first element replaced by a count of this worker's runs (two
  runs on the same inputs differ, as a kernel reading uninitialized memory may);
- ``fast``: the right answer, every timed sample 1 ns (below any floor);
- ``hang``: never answers.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from cake_core.problems.kmeans_assign.oracle import nearest_numpy
from cake_core.runtime.protocol import RunReply, RunRequest
from fake_gpu import ZeroGpu

SCRIPT_ENV = "CAKE_TEST_GPU_SCRIPT"
SAMPLE_MS = {"honest": 1.0, "flaky": 1.0, "fast": 1e-6}


class ScriptedGpu(ZeroGpu):
    _runs = itertools.count(1)

    def run(self, request: RunRequest) -> RunReply:
        mode = Path(os.environ[SCRIPT_ENV]).read_text().strip()
        if mode == "hang":
            time.sleep(3600)
        x, c = request.inputs["x"], request.inputs["c"]
        out = nearest_numpy(x, c, request.plan.tensor("x").dtype)
        if mode == "flaky":
            out[0, 0] = next(self._runs) % c.shape[1]
        samples = tuple(SAMPLE_MS[mode] for _ in range(request.timing.reps)) if request.timing else ()
        zeros = super().run(request).outputs  # every other fetched tensor (scratch), as zeros
        return RunReply(status="ok", outputs={**zeros, "out": out}, samples_ms=samples)
