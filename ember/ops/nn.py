"""Convolution and pooling ops (ONNX semantics); the code lives in conv.py and pool.py."""

from __future__ import annotations

from ember.ops import conv, pool
from ember.ops.registry import OpDef

OPS: dict[str, OpDef] = {**conv.OPS, **pool.OPS}
