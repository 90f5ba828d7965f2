"""Helpers for tests and benchmarks: numpy references and small te workloads."""

from __future__ import annotations

import numpy as np

from ember import te


def conv2d_nchw(N: int, C: int, H: int, W: int, F: int, R: int, pad: int
                ) -> tuple[te.Tensor, te.Tensor, te.Tensor, te.Tensor]:
    """(X, W, X_padded, Y): a stride-1 NCHW convolution with zero padding written in te."""
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((F, C, R, R), name="W")
    Xp = te.compute((N, C, H + 2 * pad, W + 2 * pad),
                    lambda n, c, h, w: te.if_then_else(
                        te.all(h >= pad, h < H + pad, w >= pad, w < W + pad),
                        X[n, c, h - pad, w - pad], 0.0), name="Xp")
    OH, OW = H + 2 * pad - R + 1, W + 2 * pad - R + 1
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, R), name="rx")
    Y = te.compute((N, F, OH, OW), lambda n, f, y, x: te.sum(
        Xp[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    return X, Wt, Xp, Y  # type: ignore[return-value]


def conv2d_reference(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """numpy stride-1 NCHW convolution, accumulated in float64."""
    N, C, H, W = x.shape
    F, _, R, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH, OW = H + 2 * pad - R + 1, W + 2 * pad - R + 1
    out = np.zeros((N, F, OH, OW), "float64")
    for ry in range(R):
        for rx in range(R):
            patch = xp[:, :, ry:ry + OH, rx:rx + OW]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, ry, rx])
    return out.astype(x.dtype)
