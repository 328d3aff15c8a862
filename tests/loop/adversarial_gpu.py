"""A GPU-free worker backend that behaves as the file named by ``$CAKE_TEST_GPU_SCRIPT`` says, run by run.

It stands in for the GPU where a test drives stage 3's defences through the real worker machinery
without one. The file holds one word, read at every run (so a test can change it between runs):

- ``honest``: ``fake_gpu.ReferenceGpu``'s answers (kmeans-assign's numpy reference, 1 to 2 ms a run);
- ``flaky``: those, with the first element replaced by a count of this worker's runs (two runs on the same
  inputs differ, as a kernel reading uninitialized memory may);
- ``fast``: those, every timed sample 1 ns (below any floor);
- ``hang``: never answers.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from cake_core.runtime.protocol import RunReply, RunRequest
from fake_gpu import ReferenceGpu

SCRIPT_ENV = "CAKE_TEST_GPU_SCRIPT"


class ScriptedGpu(ReferenceGpu):
    _runs = itertools.count(1)

    def run(self, request: RunRequest) -> RunReply:
        mode = Path(os.environ[SCRIPT_ENV]).read_text().strip()
        if mode == "hang":
            time.sleep(3600)
        reply = super().run(request)
        if mode == "flaky":
            reply.outputs["out"][0, 0] = next(self._runs) % request.inputs["c"].shape[1]
        if mode == "fast":
            return RunReply(status="ok", outputs=reply.outputs, samples_ms=tuple(1e-6 for _ in reply.samples_ms))
        return reply
