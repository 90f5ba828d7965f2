"""GPU computes of 2-D convolution (the same numbers as ember.ops.conv, another form).

The CPU compute blocks output channels for vector registers; a GPU wants the product in a
form whose tiles map onto threads and shared memory:

    pad[n, c, y, x]                       zero-padded input (inlined into its readers)
    col[n, k, oh, ow]  = pad[n, k // KK, oh*s + (k // KW % KH)*d, ow*s + (k % KW)*d]
    wmat[oc, k]        = w[oc, k // KK, k // KW % KH, k % KW]          (KK = KH * KW)
    conv[n, oc, oh, ow] = sum_k wmat[oc, k] * col[n, k, oh, ow]        (one reduction axis)
    conv_out            = conv (+ bias[oc])

`col` and `wmat` are views, never stored whole: the implicit-GEMM schedule copies one
k-slice of each into shared memory at a time, the direct schedule inlines them and copies
the input window of a tile instead. Depthwise convolutions (one input channel per output)
reduce over the window only:

    dw[n, c, oh, ow] = sum_{kh, kw} pad[n, c // M, oh*s + kh*d, ow*s + kw*d] * w[c, 0, kh, kw]

Grouped convolutions that are neither keep ember.ops.conv's plain compute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember import te
from ember.ops.conv_common import conv_geometry, pad_input, shape_of
from ember.ops.registry import Attrs
from ember.te.tensor import Tensor
from ember.tir.expr import Expr

GEMM_TAG = "Conv.gemm"
DEPTHWISE_TAG = "Conv.depthwise"
COL_TAG = "Conv.col"
WMAT_TAG = "Conv.wmat"
OUT_TAG = "Conv.out"


def _with_bias(conv: Tensor, bias: Tensor | None) -> Tensor:
    def fout(n: Expr, c: Expr, h: Expr, w: Expr) -> Expr:
        v = conv[n, c, h, w]
        return v + bias[c] if bias is not None else v

    return te.compute(conv.shape, fout, name="conv_out", tag=OUT_TAG)  # type: ignore


def conv_gemm(x: Tensor, w: Tensor, bias: Tensor | None, strides: Sequence[int],
              dilations: Sequence[int], out_sp: Sequence[int]) -> Tensor:
    """conv of an already padded x (group 1) with one fused reduction axis k (see above)."""
    n_batch, _, _, _ = shape_of(x)
    oc, ic, kh, kw = shape_of(w)
    kk = kh * kw
    (sh, sw), (dh, dw) = strides, dilations
    col = te.compute((n_batch, ic * kk, *out_sp),
                     lambda n, k, y, z: x[n, k // kk, y * sh + (k // kw % kh) * dh,
                                          z * sw + (k % kw) * dw], name="col", tag=COL_TAG)
    wmat = te.compute((oc, ic * kk), lambda o, k: w[o, k // kk, k // kw % kh, k % kw],
                      name="wmat", tag=WMAT_TAG)
    r = te.reduce_axis((0, ic * kk), name="k")
    conv = te.compute((n_batch, oc, *out_sp),
                      lambda n, o, y, z: te.sum(wmat[o, r] * col[n, r, y, z], axis=[r]),
                      name="conv", tag=GEMM_TAG)
    return _with_bias(conv, bias)  # type: ignore[arg-type]


def conv_depthwise(x: Tensor, w: Tensor, bias: Tensor | None, strides: Sequence[int],
                   dilations: Sequence[int], out_sp: Sequence[int]) -> Tensor:
    """conv of an already padded x where every output channel reads one input channel."""
    n_batch, channels, _, _ = shape_of(x)
    oc, _, kh, kw = shape_of(w)
    mult = oc // channels
    (sh, sw), (dh, dw) = strides, dilations
    ry = te.reduce_axis((0, kh), name="ky")
    rx = te.reduce_axis((0, kw), name="kx")
    conv = te.compute((n_batch, oc, *out_sp),
                      lambda n, c, y, z: te.sum(
                          x[n, c // mult if mult > 1 else c, y * sh + ry * dh, z * sw + rx * dw]
                          * w[c, 0, ry, rx], axis=[ry, rx]),
                      name="conv", tag=DEPTHWISE_TAG)
    return _with_bias(conv, bias)  # type: ignore[arg-type]


def gpu_conv_form(attrs: Attrs, xs: Sequence[int], ws: Sequence[int]) -> str:
    """Which compute a Conv of these shapes gets on GPUs: gemm, depthwise or plain."""
    group = int(attrs.get("group", 1))
    if len(xs) != 4:
        return "plain"
    if group == 1:
        return "gemm"
    if ws[1] == 1 and group == xs[1]:
        return "depthwise"
    return "plain"


def compute_conv_gpu(attrs: Attrs, inputs: Sequence[Tensor | None],
                     fallback: Callable[[Attrs, Sequence[Tensor | None]], list[Tensor]]
                     ) -> list[Tensor]:
    """The GPU compute of a Conv node (see the module docstring); `fallback` (the CPU
    compute) for 1-D/3-D and grouped convolutions."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    form = gpu_conv_form(attrs, shape_of(x), shape_of(w))
    if form == "plain":
        return fallback(attrs, inputs)
    _, strides, dilations, pads, out = conv_geometry(attrs, x, w)
    padded = pad_input(x, pads)
    make = conv_gemm if form == "gemm" else conv_depthwise
    return [make(padded, w, bias, strides, dilations, out)]
