"""ConvNCHWc (direct, 1x1, depthwise) and LayoutTransform against onnxruntime; knobs; errors."""

import numpy as np
import pytest

from ember import te
from ember.lowering.build import build
from ember.errors import ScheduleError, ShapeError
from ember.graph.ir import GraphBuilder
from ember.ops.conv_blocked import (
    OPS,
    ConvKnobs,
    conv_tile,
    from_blocked,
    pack_depthwise,
    pack_direct,
    schedule_conv_nchwc,
    to_blocked,
)
from ember.ops.conv_winograd import pack_winograd
from ember.lowering.kernel import run_op
from ember.target import Target
from tests.ops.onnx_ref import onnx_run

RNG = np.random.default_rng(5)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def blocked_attrs(ws, attrs, algorithm):
    return {"kernel_shape": tuple(ws[2:]), "strides": tuple(attrs.get("strides", (1, 1))),
            "dilations": tuple(attrs.get("dilations", (1, 1))),
            "pads": tuple(attrs.get("pads", (0, 0, 0, 0))), "algorithm": algorithm}


CASES = [
    # (x shape, w shape, ONNX attrs, input block (0: NCHW input), output block)
    ((1, 16, 9, 10), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}, 16, 16),
    ((2, 8, 9, 11), (24, 8, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 2]}, 8, 8),
    ((1, 16, 11, 9), (16, 16, 3, 3), {"strides": [2, 1], "dilations": [2, 2]}, 8, 16),
    ((1, 32, 7, 7), (64, 32, 1, 1), {}, 16, 16),                    # 1x1: a packed GEMM
    ((1, 24, 13, 13), (40, 24, 1, 1), {}, 8, 8),                    # width 13: tile tails
    ((1, 3, 12, 13), (16, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, 0, 16),
    ((1, 3, 15, 15), (8, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}, 3, 8),
    # half-width output blocks: the FMAs-per-load tile (several channel blocks, column tails)
    ((1, 32, 13, 13), (120, 32, 1, 1), {}, 16, 8),
    ((1, 16, 9, 11), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}, 16, 8),
]


@pytest.mark.parametrize("xs, ws, attrs, ib, ob", CASES)
def test_direct_matches_onnxruntime(xs, ws, attrs, ib, ob):
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    (ref,) = onnx_run("Conv", [x, w, b], attrs)
    xin = to_blocked(x, ib) if ib else x
    (got,) = run_op("ConvNCHWc", [xin, pack_direct(w, ib or xs[1], ob), b],
                    blocked_attrs(ws, attrs, "direct"))
    np.testing.assert_allclose(from_blocked(got), ref, rtol=1e-4, atol=1e-4)


DEPTHWISE = [
    ((1, 32, 9, 9), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, 16),
    ((1, 16, 10, 11), {"pads": [1, 1, 1, 1]}, 8),
    ((2, 16, 12, 10), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, 16),
    ((1, 8, 7, 8), {"pads": [0, 1, 1, 0], "strides": [2, 1]}, 8),
]


@pytest.mark.parametrize("xs, attrs, block", DEPTHWISE)
def test_depthwise_matches_onnxruntime(xs, attrs, block):
    c = xs[1]
    x, w, b = rand(*xs), rand(c, 1, 3, 3), rand(c)
    (ref,) = onnx_run("Conv", [x, w, b], {**attrs, "group": c})
    (got,) = run_op("ConvNCHWc", [to_blocked(x, block), pack_depthwise(w, block), b],
                    blocked_attrs(w.shape, attrs, "depthwise"))
    np.testing.assert_allclose(from_blocked(got), ref, rtol=1e-4, atol=1e-4)


WINOGRAD = [
    ((1, 16, 8, 8), 32, {"pads": [1, 1, 1, 1]}, 16, 16),
    ((2, 16, 7, 9), 16, {"pads": [1, 0, 1, 2]}, 8, 16),     # odd sizes: partial tiles
    ((1, 8, 6, 5), 8, {}, 8, 8),                             # no padding
    ((2, 16, 15, 14), 16, {"pads": [1, 1, 1, 1]}, 16, 8),   # 15 rows: a 3-row last F(4,3) tile
]


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("xs, oc, attrs, ib, ob", WINOGRAD)
def test_winograd_matches_onnxruntime(xs, oc, attrs, ib, ob, tile):
    x, w, b = rand(*xs), rand(oc, xs[1], 3, 3), rand(oc)
    (ref,) = onnx_run("Conv", [x, w, b], attrs)
    u = pack_winograd(w, ib, ob, tile)
    assert u.shape[0] == (tile + 2) ** 2
    (got,) = run_op("ConvNCHWc", [to_blocked(x, ib), u, b],
                    blocked_attrs(w.shape, attrs, "winograd"))
    # F(4,3)'s points +-2 scale the rounding error (outputs here are about 12 in size)
    np.testing.assert_allclose(from_blocked(got), ref, rtol=1e-4, atol=1e-4 * tile)


def test_winograd_f43_error_is_bounded_by_float32_rounding():
    """F(4,3) against a float64 reference on a ResNet-sized layer: the error stays within a
    few float32 ulps of the output's scale (a wrong transform entry would be far off)."""
    x, w = rand(1, 64, 14, 14), rand(64, 64, 3, 3) / 24
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 64, 14, 14))
    for dy in range(3):
        for dx in range(3):
            ref += np.einsum("oi,nihw->nohw", w[:, :, dy, dx].astype(np.float64),
                             x64[:, :, dy:dy + 14, dx:dx + 14])
    attrs = {"pads": [1, 1, 1, 1]}
    (got,) = run_op("ConvNCHWc", [to_blocked(x, 16), pack_winograd(w, 16, 16, 4),
                                  np.zeros(64, "float32")],
                    blocked_attrs(w.shape, attrs, "winograd"))
    err = np.abs(from_blocked(got) - ref).max() / np.abs(ref).max()
    assert err < 2e-5, err


def test_narrow_blocks_tile_rule():
    """Half-width blocks take the tile with the most FMAs per load; full-width ones keep the
    widest dividing column tile."""
    ow_tile, oc_tile = conv_tile((1, 125, 13, 13, 8), lanes=16)
    assert (ow_tile, oc_tile) == (5, 5)
    assert 125 % oc_tile == 0 and ow_tile * oc_tile <= 25
    assert conv_tile((1, 3, 56, 56, 8), lanes=16) == (8, 3)
    assert conv_tile((1, 4, 56, 56, 16), lanes=16) == (14, 1)


def _check_knobs(knobs, x, w, packed, block, algorithm, bias=None):
    """The blocked conv of x (blocks of `block`) with `packed` weights, scheduled with
    `knobs`, against onnxruntime's Conv of x and w (same padding)."""
    pads = [w.shape[-1] // 2] * 4
    op = OPS["ConvNCHWc"]
    attrs = op.complete_attrs(blocked_attrs(w.shape, {"pads": pads}, algorithm))
    xb = to_blocked(x, block)
    arrays = [xb, packed] + ([bias] if bias is not None else [])
    holders = [te.placeholder(a.shape, "float32", name=f"in{i}") for i, a in enumerate(arrays)]
    (out,) = op.compute(attrs, holders)
    module = build(schedule_conv_nchwc([out], Target("llvm"), knobs), [*holders, out])
    got = np.zeros([int(d.value) for d in out.shape], "float32")
    module(*arrays, got)
    (ref,) = onnx_run("Conv", [x, w] + ([bias] if bias is not None else []), {"pads": pads})
    np.testing.assert_allclose(from_blocked(got), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("knobs", [ConvKnobs(ow_tile=3, oc_tile=2), ConvKnobs(ow_tile=5),
                                   ConvKnobs(oc_tile=1, unroll_kw=True, unroll_ii=True),
                                   ConvKnobs(ow_tile=4, parallel_columns=True),
                                   ConvKnobs(ow_tile=4, oc_tile=2, rows_outer=True)])
def test_knobs_keep_the_numbers(knobs):
    x, w = rand(1, 16, 8, 11), rand(32, 16, 3, 3)
    _check_knobs(knobs, x, w, pack_direct(w, 8, 16), 8, "direct")


@pytest.mark.parametrize("knobs", [ConvKnobs(ow_tile=4, oc_tile=2, k_chunk=1),
                                   ConvKnobs(ow_tile=3, oc_tile=1, k_chunk=2, unroll_ii=True),
                                   ConvKnobs(ow_tile=11, oc_tile=2, k_chunk=2, unroll_kw=True)])
@pytest.mark.parametrize("kernel", [1, 3])
def test_chunked_reduction_keeps_the_numbers(knobs, kernel):
    """k_chunk: the weights streamed once, the partial sums of a channel tile in a buffer
    over chunks of input-channel blocks (4 blocks of 4 here), with a tail column tile."""
    x, w, b = rand(1, 16, 8, 11), rand(32, 16, kernel, kernel), rand(32)
    _check_knobs(knobs, x, w, pack_direct(w, 4, 16), 4, "direct", bias=b)


def test_chunk_must_divide_the_input_blocks():
    x, w = rand(1, 12, 6, 6), rand(16, 12, 1, 1)
    op = OPS["ConvNCHWc"]
    attrs = op.complete_attrs(blocked_attrs(w.shape, {}, "direct"))
    X = te.placeholder(to_blocked(x, 4).shape, "float32", name="X")
    W = te.placeholder(pack_direct(w, 4, 16).shape, "float32", name="W")
    (out,) = op.compute(attrs, [X, W])
    with pytest.raises(ScheduleError, match="k_chunk=2 does not divide the 3 input-channel"):
        schedule_conv_nchwc([out], Target("llvm"), ConvKnobs(ow_tile=2, k_chunk=2))


@pytest.mark.parametrize("knobs", [ConvKnobs(ow_tile=5, oc_tile=2, unroll_ii=True),
                                   ConvKnobs(ow_tile=3, oc_tile=4, k_chunk=1),
                                   ConvKnobs(ow_tile=6, oc_tile=2, unroll_ii=True, k_chunk=1),
                                   ConvKnobs(ow_tile=7, oc_tile=1, parallel_columns=True)])
def test_winograd_register_tiles_keep_the_numbers(knobs):
    """The Winograd GEMM's tile of output tiles x channel blocks, with tail tiles (16 of
    them, 4 x 4 of 2 x 2 here), and in chunks of input blocks (2 blocks of 8)."""
    x, w = rand(1, 16, 8, 8), rand(64, 16, 3, 3)
    _check_knobs(knobs, x, w, pack_winograd(w, 8, 16, 2), 8, "winograd")


def test_epilogue_fused_with_blocked_constants():
    """ConvNCHWc -> Add(per-channel, blocked) -> Clip -> Add(residual) as one kernel."""
    from ember.lowering.kernel import build_group

    x, w, res = rand(1, 16, 6, 7), rand(16, 16, 3, 3), rand(1, 16, 6, 7)
    shift = rand(16)
    b = GraphBuilder("g")
    xv, rv = b.input("x", (1, 1, 6, 7, 16), "float32"), b.input("r", (1, 1, 6, 7, 16), "float32")
    wv = b.constant("w", pack_direct(w, 16, 16))
    sv = b.constant("s", shift.reshape(1, 1, 1, 1, 16))
    (y,) = b.add("ConvNCHWc", [xv, wv], blocked_attrs(w.shape, {"pads": [1] * 4}, "direct"))
    (y,) = b.add("Add", [y, sv])
    (y,) = b.add("Clip", [y], {"min": 0.0, "max": 1.0})
    (y,) = b.add("Add", [y, rv])
    g = b.finish([y])
    module = build_group("g", g.nodes, [xv, wv, sv, rv], [y])
    out = np.zeros(y.type.shape, "float32")
    module(to_blocked(x, 16), wv.data, sv.data, to_blocked(res, 16), out)
    (conv,) = onnx_run("Conv", [x, w], {"pads": [1] * 4})
    want = np.clip(conv + shift.reshape(1, 16, 1, 1), 0, 1) + res
    np.testing.assert_allclose(from_blocked(out), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, src, dst", [((2, 24, 5, 6), 0, 8), ((1, 3, 4, 5), 0, 3),
                                             ((1, 2, 5, 3, 16), 16, 0),
                                             ((1, 4, 3, 3, 8), 8, 16)])
def test_layout_transform(shape, src, dst):
    x = rand(*shape)
    (got,) = run_op("LayoutTransform", [x], {"src_block": src, "dst_block": dst})
    plain = from_blocked(x) if src else x
    want = to_blocked(plain, dst) if dst else plain
    np.testing.assert_array_equal(got, want)


def test_shape_errors():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 2, 8, 8, 16), "float32")
    w = b.constant("w", rand(4, 3, 3, 3, 16, 16))
    with pytest.raises(ShapeError, match=r"weight \(4, 3, 3, 3, 16, 16\) must be packed"):
        b.add("ConvNCHWc", [x, w], {"kernel_shape": (3, 3)})
    dw = b.constant("dw", rand(2, 3, 3, 8))
    with pytest.raises(ShapeError, match="depthwise: weight"):
        b.add("ConvNCHWc", [x, dw], {"kernel_shape": (3, 3), "algorithm": "depthwise"})
    wino = b.constant("u", rand(16, 2, 2, 16, 16))
    with pytest.raises(ShapeError, match="winograd: needs a 3x3 stride-1"):
        b.add("ConvNCHWc", [x, wino], {"kernel_shape": (3, 3), "strides": (2, 2),
                                       "algorithm": "winograd"})
    with pytest.raises(ShapeError, match="algorithm must be one of"):
        b.add("ConvNCHWc", [x, w], {"kernel_shape": (3, 3), "algorithm": "fft"})
    with pytest.raises(ShapeError, match="no multiple of 16"):
        b.add("LayoutTransform", [b.input("y", (1, 24, 4, 4), "float32")], {"dst_block": 16})


@pytest.mark.parametrize("algorithm", ["direct", "depthwise", "winograd"])
def test_group_with_two_outputs(algorithm):
    """The convolution and its Relu both leave the kernel (the whole-tensor schedule)."""
    from ember.lowering.kernel import build_group

    x = rand(1, 16, 6, 7)
    w = rand(16, 1, 3, 3) if algorithm == "depthwise" else rand(16, 16, 3, 3)
    packed = {"direct": lambda: pack_direct(w, 16, 16), "depthwise": lambda: pack_depthwise(w, 16),
              "winograd": lambda: pack_winograd(w, 16, 16)}[algorithm]()
    b = GraphBuilder("two")
    xv, wv = b.input("x", (1, 1, 6, 7, 16), "float32"), b.constant("w", packed)
    (y,) = b.add("ConvNCHWc", [xv, wv], blocked_attrs(w.shape, {"pads": [1] * 4}, algorithm))
    (r,) = b.add("Relu", [y])
    g = b.finish([y, r])
    module = build_group("two", g.nodes, [xv, wv], [y, r])
    outs = [np.zeros(y.type.shape, "float32") for _ in range(2)]
    module(to_blocked(x, 16), packed, *outs)
    group = {"group": 16} if algorithm == "depthwise" else {}
    (conv,) = onnx_run("Conv", [x, w], {"pads": [1] * 4, **group})
    np.testing.assert_allclose(from_blocked(outs[0]), conv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(from_blocked(outs[1]), np.maximum(conv, 0), rtol=1e-4, atol=1e-4)
