"""Image ops against onnxruntime: Resize (all modes), Upsample, DepthToSpace, SpaceToDepth."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.lowering.kernel import run_op
from tests.ops.onnx_ref import check_op

rng = np.random.default_rng(11)
RESIZE_NAMES = {1: "roi", 2: "scales", 3: "sizes"}


def rand(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype("float32")


def f32(*values: float) -> np.ndarray:
    return np.array(values, "float32")


def resize(x, attrs, scales=None, sizes=None, roi=None, opset=19, rtol=1e-5, atol=1e-5):
    if opset < 13:  # roi and scales are not optional there: empty tensors mean absent
        roi = f32() if roi is None else roi
        scales = f32() if scales is None else scales
    consts = {1: roi, 2: scales, 3: None if sizes is None else np.array(sizes, "int64")}
    return check_op("Resize", [x], attrs, const_inputs=consts, attr_names=RESIZE_NAMES,
                    opset=opset, rtol=rtol, atol=atol)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
@pytest.mark.parametrize("coordinate_mode", ["half_pixel", "asymmetric", "align_corners",
                                             "pytorch_half_pixel", "tf_half_pixel_for_nn"])
def test_resize_nearest(nearest_mode, coordinate_mode):
    attrs = {"mode": "nearest", "nearest_mode": nearest_mode,
             "coordinate_transformation_mode": coordinate_mode}
    x = rand(1, 2, 4, 5)
    opset = 11 if "tf_" in coordinate_mode else 19
    resize(x, attrs, scales=f32(1, 1, 2.0, 0.6), opset=opset)
    resize(x, attrs, sizes=(1, 2, 3, 11), opset=opset)


@pytest.mark.parametrize("coordinate_mode", ["half_pixel", "asymmetric", "align_corners",
                                             "pytorch_half_pixel", "half_pixel_symmetric"])
def test_resize_linear(coordinate_mode):
    attrs = {"mode": "linear", "coordinate_transformation_mode": coordinate_mode}
    x = rand(2, 3, 5, 4)
    resize(x, attrs, scales=f32(1, 1, 2.0, 0.5))
    resize(x, attrs, sizes=(2, 3, 1, 9))
    if coordinate_mode != "align_corners":  # fractional lengths: see the test below
        resize(x, attrs, scales=f32(1, 1, 1.5, 0.5))
        resize(rand(2, 7), attrs, scales=f32(1, 2.25))


def _align_corners_linear(x: np.ndarray, axis: int, scale: float) -> np.ndarray:
    """The spec's linear align_corners along one axis, in float64: x_original =
    x_resized * (length_original - 1) / (length_resized - 1), length_resized = scale * n."""
    n = x.shape[axis]
    out = int(np.float32(n) * np.float32(scale))
    length = float(np.float32(scale)) * n
    pos = np.zeros(out) if out == 1 else np.arange(out) * (n - 1) / (length - 1)
    pos = np.clip(pos, 0, n - 1)
    low = np.floor(pos).astype(int)
    high = np.minimum(low + 1, n - 1)
    shape = [1] * x.ndim
    shape[axis] = out
    t = (pos - low).reshape(shape)
    return np.take(x, low, axis) * (1 - t) + np.take(x, high, axis) * t


def test_resize_align_corners_with_a_fractional_resized_length():
    # 5 * 1.5 = 7.5 and 4 * 0.6 = 2.4: the spec divides by 6.5 and 1.4, not by 6 and 1
    # (onnxruntime divides by the integer sizes; ONNX's node tests follow the spec)
    x = rand(2, 3, 5, 4)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "align_corners",
             "scales": (1.0, 1.0, 1.5, 0.6)}
    (got,) = run_op("Resize", [x], attrs)
    want = _align_corners_linear(_align_corners_linear(x.astype(np.float64), 2, 1.5), 3, 0.6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("exclude_outside", [0, 1])
def test_resize_cubic(exclude_outside):
    attrs = {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": exclude_outside}
    resize(rand(1, 1, 5, 6), attrs, scales=f32(1, 1, 2.0, 0.7), rtol=1e-4, atol=1e-5)
    resize(rand(1, 1, 4, 4), {"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
           sizes=(1, 1, 7, 3), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coordinate_mode, exclude_outside", [
    ("half_pixel", 0), ("half_pixel", 1), ("asymmetric", 0), ("align_corners", 0),
    ("pytorch_half_pixel", 1),
])
def test_resize_antialias(mode, coordinate_mode, exclude_outside):
    """The filter widened by 1 / scale on downsampled axes (upsampled ones unchanged)."""
    attrs = {"mode": mode, "antialias": 1, "coordinate_transformation_mode": coordinate_mode,
             "exclude_outside": exclude_outside}
    x = rand(1, 2, 9, 8)
    resize(x, attrs, sizes=(1, 2, 3, 11), rtol=1e-4, atol=1e-5)
    if coordinate_mode != "align_corners":  # fractional lengths: onnxruntime departs there
        resize(x, attrs, scales=f32(1, 1, 0.5, 0.8), rtol=1e-4, atol=1e-5)
        resize(rand(2, 13), attrs, scales=f32(1, 0.3), rtol=1e-4, atol=1e-5)


def test_resize_tf_crop_and_resize():
    x = rand(1, 1, 6, 6)
    roi = f32(0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3)
    for mode in ("linear", "nearest"):
        attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
                 "extrapolation_value": 5.0}
        resize(x, attrs, sizes=(1, 1, 4, 5), roi=roi)


def test_resize_axes_policy_and_int():
    x = rand(1, 2, 6, 8)
    resize(x, {"axes": (3, 2)}, scales=f32(0.5, 1.5))
    check_op("Resize", [x], {"axes": (3, 2)}, const_inputs={1: None, 2: f32(0.5, 1.5)},
             attr_names=RESIZE_NAMES, opset=19, ember_attrs={"axes": (-1, -2)})
    for policy in ("not_larger", "not_smaller"):
        resize(x, {"mode": "linear", "keep_aspect_ratio_policy": policy, "axes": (2, 3)},
               sizes=(9, 10))
        resize(x, {"keep_aspect_ratio_policy": policy}, sizes=(1, 2, 9, 10))
    resize(rng.integers(0, 255, (1, 3, 4, 4)).astype("uint8"), {}, scales=f32(1, 1, 2, 3))
    resize(rng.integers(-9, 9, (2, 5)).astype("int32"), {"nearest_mode": "floor"},
           sizes=(3, 7))


def test_resize_errors():
    x = rand(1, 1, 4, 4)
    with pytest.raises(UnsupportedOpError, match="antialias=1"):
        run_op("Resize", [x], {"antialias": 1, "scales": (1, 1, 2, 2)})
    with pytest.raises(UnsupportedOpError, match="mode='area'"):
        run_op("Resize", [x], {"mode": "area", "scales": (1, 1, 2, 2)})
    with pytest.raises(ShapeError, match="exactly one of scales and sizes"):
        run_op("Resize", [x], {"scales": (1, 1, 2, 2), "sizes": (1, 1, 8, 8)})
    with pytest.raises(ShapeError, match="must have 4 entries"):
        run_op("Resize", [x], {"scales": (2, 2)})
    with pytest.raises(UnsupportedOpError, match="float inputs only"):
        run_op("Resize", [x.astype("int32")], {"mode": "linear", "scales": (1, 1, 2, 2)})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(mode):
    x = rand(1, 2, 3, 4)
    check_op("Upsample", [x], {"mode": mode}, const_inputs={1: f32(1, 1, 2, 3)},
             attr_names={1: "scales"}, opset=9)
    check_op("Upsample", [x], {"mode": mode}, const_inputs={1: f32(1, 1, 1.5, 2.5)},
             attr_names={1: "scales"}, opset=9)
    check_op("Resize", [x], {"mode": mode}, const_inputs={1: f32(1, 1, 3, 0.75)},
             attr_names={1: "scales"}, opset=10,
             ember_attrs={"coordinate_transformation_mode": "asymmetric",
                          "nearest_mode": "legacy"})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    check_op("DepthToSpace", [rand(2, 8, 3, 2)], {"blocksize": 2, "mode": mode})
    check_op("DepthToSpace", [rand(1, 18, 2, 3)], {"blocksize": 3, "mode": mode})


def test_space_to_depth_and_errors():
    check_op("SpaceToDepth", [rand(2, 3, 4, 6)], {"blocksize": 2})
    check_op("SpaceToDepth", [rand(1, 2, 3, 6)], {"blocksize": 3})
    for mode in ("DCR", "CRD"):  # SpaceToDepth inverts DepthToSpace of the same mode
        x = rand(1, 3, 4, 6)
        (y,) = run_op("SpaceToDepth", [x], {"blocksize": 2, "mode": mode})
        (back,) = run_op("DepthToSpace", [y], {"blocksize": 2, "mode": mode})
        np.testing.assert_array_equal(back, x)
    with pytest.raises(ShapeError, match="not divisible by blocksize"):
        run_op("DepthToSpace", [rand(1, 6, 2, 2)], {"blocksize": 2})
    with pytest.raises(ShapeError, match="must be divisible by blocksize 2"):
        run_op("SpaceToDepth", [rand(1, 6, 3, 2)], {"blocksize": 2})
    with pytest.raises(UnsupportedOpError, match="mode 'XYZ'"):
        run_op("DepthToSpace", [rand(1, 8, 2, 2)], {"blocksize": 2, "mode": "XYZ"})


def test_resize_parallel_size():
    x = rand(1, 3, 48, 40)
    resize(x, {"mode": "linear"}, scales=f32(1, 1, 2, 2))
    resize(x, {"mode": "nearest"}, sizes=(1, 3, 100, 90))


def test_resize_fused_epilogue_reads_twice():
    """Resize inlined twice into a fused Add keeps its shared coordinates (Let) correct."""
    from ember.graph.ir import Node, Value, tensor_type
    from ember.lowering.kernel import build_group
    from ember.ops.registry import get_op
    from tests.ops.onnx_ref import onnx_run

    x = rand(1, 2, 5, 6)
    base = {"mode": "cubic", "exclude_outside": 1}
    attrs = get_op("Resize").complete_attrs({**base, "scales": (1, 1, 2.0, 1.5)})
    xv = Value("x", tensor_type(x.shape, "float32"))
    (out_type,) = get_op("Resize").infer(attrs, [xv.type])
    yv, zv = Value("y", out_type), Value("z", out_type)
    nodes = [Node("Resize", "r", (xv,), (yv,), attrs), Node("Add", "a", (yv, yv), (zv,), {})]
    module = build_group("resize_add", nodes, [xv], [zv])
    z = np.zeros(out_type.shape, "float32")
    module(x, z)
    (ref,) = onnx_run("Resize", [x], base, const_inputs={1: None, 2: f32(1, 1, 2.0, 1.5)},
                      opset=19)
    np.testing.assert_allclose(z, 2 * ref, rtol=1e-5, atol=1e-5)
