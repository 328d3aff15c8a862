"""NVRTC compile (cuda-python), resource report, SASS checks, launch, timing, isolated GPU workers.

Modules (import what you need; nothing here initializes CUDA):

- :mod:`~cake_core.runtime.plan`: launch-plan data types (the contract with lowering and problems);
- :mod:`~cake_core.runtime.nvrtc`: ``compile_cuda`` with a disk cache and a parsed ``ptxas -v`` report
  (:mod:`~cake_core.runtime.ptxas`);
- :mod:`~cake_core.runtime.sass`: cuobjdump disassembly and instruction claims;
- :mod:`~cake_core.runtime.device`: driver detection without CUDA in the caller, ``DeviceInfo``;
- :mod:`~cake_core.runtime.worker`: ``GpuRunner``, which runs plans in a spawned worker process
  (:mod:`~cake_core.runtime.executor` is the CUDA driver code that runs there);
- :mod:`~cake_core.runtime.prepare`: host-side plan checks, scalar packing and poison patterns.
"""
