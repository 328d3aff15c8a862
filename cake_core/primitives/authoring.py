"""The helpers for writing a primitive that plugins may import: the type-rule checks the core's own
primitives use (shapes known at compile time, agreeing element types and sizes, a tensor-core MMA's
operands) and the text of a shape in a diagnostic. The core keeps them in a private module; this one
is their public, stable name."""

from __future__ import annotations

from cake_core.primitives._common import mma_operands, need_static, same_dtype, same_numel, shape_text

__all__ = ["mma_operands", "need_static", "same_dtype", "same_numel", "shape_text"]
