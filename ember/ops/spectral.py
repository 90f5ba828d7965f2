"""Spectral ops (ONNX semantics): DFT, STFT.

DFT transforms one signal axis of a real ([..., 1]) or complex ([..., 2]) input into a
complex output ([..., 2]): out[k] = sum_j x[j] e^(-+2 pi i jk / n), divided by n when
inverse. It is one te reduction over j: the twiddle angle is taken from (j * k) mod n, an
exact integer, so it stays accurate for long signals, and the sum runs in float64. A
`dft_length` shorter than the axis reads its start, a longer one pads with zeros; onesided
keeps the first n // 2 + 1 outputs; inverse and onesided together read a one-sided
spectrum (the rest by Hermitian symmetry) and give real samples ([..., 1]). The generic
reduction schedule makes it parallel.

STFT frames a signal (batch, length, 1 or 2) every frame_step samples into frames of
frame_length (the window's length when a window is given), multiplies each by the window
and takes its DFT, the same float64 reduction: out[b, f, k] = sum_j x[b, f * step + j]
w[j] e^(-2 pi i jk / n), with n // 2 + 1 bins when onesided (a real signal only).
"""

from __future__ import annotations

import math
from typing import Sequence

from ember import te, tir
from ember.errors import ShapeError, UnsupportedOpError
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.te.tensor import Tensor
from ember.tir.expr import Expr
from ember.types import TensorType


def _plan(a: Attrs, shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(axis, transform length n, output length along the axis), all checked."""
    rank = len(shape)
    if rank < 2 or shape[-1] not in (1, 2):
        raise ShapeError(f"DFT: the input's last axis must hold 1 (real) or 2 (complex) "
                         f"components, got shape {shape}")
    for key in ("inverse", "onesided"):
        if a[key] not in (0, 1):
            raise UnsupportedOpError(f"DFT: {key} must be 0 or 1, got {a[key]!r}")
    axis = int(a["axis"])
    # negative axes count from the end of the whole shape, the component axis included
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise ShapeError(f"DFT: axis {axis} is not a signal axis of shape {shape} (expected "
                         f"{-rank}..-2 or 0..{rank - 2})")
    axis %= rank
    length = a.get("dft_length")
    inverse_half = bool(a["inverse"] and a["onesided"])
    if length is None:
        # a one-sided spectrum of m points is the transform of 2 (m - 1) real samples
        n = 2 * (shape[axis] - 1) if inverse_half else shape[axis]
    elif isinstance(length, (tuple, list)) or int(length) != length or int(length) < 1:
        raise ShapeError(f"DFT: dft_length must be one positive integer, got {length!r}")
    else:
        n = int(length)
    if n < 1:
        raise ShapeError(f"DFT: a one-sided spectrum of {shape[axis]} points along axis "
                         f"{axis} has no inverse (it needs at least 2)")
    return axis, n, n // 2 + 1 if a["onesided"] and not inverse_half else n


def _infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    x = types[0] if types else None
    if x is None:
        raise ShapeError("DFT needs an input")
    if not x.dtype.is_float:
        raise ShapeError(f"DFT needs a float input, got {x.dtype}")
    axis, _, out = _plan(a, x.shape)
    shape = list(x.shape)
    shape[axis], shape[-1] = out, 1 if a["inverse"] and a["onesided"] else 2
    return [TensorType(tuple(shape), x.dtype)]


def _compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x = tensors[0]
    assert x is not None
    shape = tuple(int(d.value) for d in x.shape)  # type: ignore[attr-defined]
    axis, n, out = _plan(a, shape)
    complex_input = shape[-1] == 2
    half = bool(a["inverse"] and a["onesided"])   # a one-sided spectrum to real samples
    sign = 1.0 if a["inverse"] else -1.0
    scale = 1.0 / n if a["inverse"] else 1.0
    given = shape[axis]
    # zero padding adds nothing; a one-sided spectrum supplies the rest by symmetry
    j = te.reduce_axis((0, n if half else min(n, given)), name="dft_j")
    out_shape = list(shape)
    out_shape[axis], out_shape[-1] = out, 1 if half else 2

    def component(index: list[Expr], part: int) -> Expr:
        if part == 1 and not complex_input:
            return te.const(0.0, "float64")
        return x[(*index[:-1], te.const(part))].astype("float64")

    def body(*i: Expr) -> Expr:
        k, part = i[axis], i[-1]
        read = list(i)
        angle = tir.FloorMod(j * k, te.const(n)).astype("float64") * (2 * math.pi / n)
        c, s = te.cos(angle), te.sin(angle) * sign
        if half:  # X[j] = conj(X[n - j]) past the given half; only the real part is wanted
            mirrored = j >= given
            read[axis] = tir.Select(mirrored, te.const(n) - j.var, j.var)
            inside = read[axis] < given
            real, imag = component(read, 0), component(read, 1)
            imag = tir.Select(mirrored, -imag, imag)
            value = te.if_then_else(inside, real * c - imag * s, te.const(0.0, "float64"))
        else:
            read[axis] = j
            real, imag = component(read, 0), component(read, 1)
            # (re + i im)(cos t + i s sin t), t = 2 pi (jk mod n) / n
            value = tir.Select(part == 0, real * c - imag * s, imag * c + real * s)
        return te.sum(value * scale, axis=j)

    total = te.compute(tuple(out_shape), body, name="dft_sum")
    result = te.compute(tuple(out_shape), lambda *i: total[i].astype(x.dtype), name="dft",
                        tag="DFT")
    return [result]  # type: ignore[list-item]


def _stft_plan(a: Attrs, signal: tuple[int, ...], window: tuple[int, ...] | None
               ) -> tuple[int, int, int, int]:
    """(frame step, frame length, frames, bins), all checked."""
    if len(signal) != 3 or signal[-1] not in (1, 2):
        raise ShapeError(f"STFT: the signal must be (batch, length, 1 or 2), got shape "
                         f"{signal}")
    step = a.get("frame_step")
    if step is None or isinstance(step, (tuple, list)) or int(step) < 1:
        raise ShapeError(f"STFT: frame_step must be one positive integer, got {step!r}")
    length = a.get("frame_length")
    if window is not None:
        if len(window) != 1:
            raise ShapeError(f"STFT: the window must be 1-D, got shape {window}")
        if length is not None and int(length) != window[0]:
            raise ShapeError(f"STFT: frame_length {length} differs from the window's length "
                             f"{window[0]}")
        length = window[0]
    if length is None or isinstance(length, (tuple, list)) or int(length) < 1:
        raise ShapeError(f"STFT: give a window or a positive frame_length, got {length!r}")
    n = int(length)
    if n > signal[1]:
        raise ShapeError(f"STFT: frames of {n} samples do not fit a signal of {signal[1]}")
    if a["onesided"] not in (0, 1):
        raise UnsupportedOpError(f"STFT: onesided must be 0 or 1, got {a['onesided']!r}")
    if a["onesided"] and signal[-1] == 2:
        raise UnsupportedOpError("STFT: onesided=1 needs a real signal (last axis 1)")
    frames = (signal[1] - n) // int(step) + 1
    return int(step), n, frames, n // 2 + 1 if a["onesided"] else n


def _stft_infer(a: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
    x = types[0] if types else None
    if x is None or not x.dtype.is_float:
        raise ShapeError("STFT needs a float signal")
    window = types[1] if len(types) > 1 else None
    if window is not None and window.dtype != x.dtype:
        raise ShapeError(f"STFT: the window ({window.dtype}) must have the signal's type "
                         f"({x.dtype})")
    _, _, frames, bins = _stft_plan(a, x.shape, None if window is None else window.shape)
    return [TensorType((x.shape[0], frames, bins, 2), x.dtype)]


def _stft_compute(a: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    x = tensors[0]
    window = tensors[1] if len(tensors) > 1 else None
    assert x is not None
    shape = tuple(int(d.value) for d in x.shape)  # type: ignore[attr-defined]
    wshape = None if window is None else (int(window.shape[0].value),)  # type: ignore
    step, n, frames, bins = _stft_plan(a, shape, wshape)
    complex_input = shape[-1] == 2
    j = te.reduce_axis((0, n), name="stft_j")

    def component(b: Expr, t: Expr, part: int) -> Expr:
        if part == 1 and not complex_input:
            return te.const(0.0, "float64")
        value = x[b, t, te.const(part)].astype("float64")
        return value if window is None else value * window[j].astype("float64")

    def body(b: Expr, f: Expr, k: Expr, part: Expr) -> Expr:
        t = f * step + j
        angle = tir.FloorMod(j * k, te.const(n)).astype("float64") * (2 * math.pi / n)
        c, s = te.cos(angle), -te.sin(angle)
        real, imag = component(b, t, 0), component(b, t, 1)
        return te.sum(tir.Select(part == 0, real * c - imag * s, imag * c + real * s), axis=j)

    out_shape = (shape[0], frames, bins, 2)
    total = te.compute(out_shape, body, name="stft_sum")
    result = te.compute(out_shape, lambda *i: total[i].astype(x.dtype), name="stft",
                        tag="STFT")
    return [result]  # type: ignore[list-item]


OPS: dict[str, OpDef] = {
    "STFT": OpDef("STFT", ("signal", "frame_step", "window", "frame_length"), _stft_infer,
                  _stft_compute, Pattern.REDUCTION,
                  attrs={"onesided": 1, "frame_step": None, "frame_length": None},
                  attr_inputs=("frame_step", "frame_length")),
    "DFT": OpDef("DFT", ("input", "dft_length", "axis"), _infer, _compute, Pattern.REDUCTION,
                 attrs={"axis": -2, "inverse": 0, "onesided": 0, "dft_length": None},
                 attr_inputs=("dft_length", "axis")),
}
