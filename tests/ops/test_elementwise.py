"""Elementwise and broadcast ops against onnxruntime: math, activations, integer rules, casts."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import check_op, ember_run, onnx_run

rng = np.random.default_rng(7)


def randn(*shape: int, dtype: str = "float32") -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def randint(*shape: int, low: int = -20, high: int = 20, dtype: str = "int32") -> np.ndarray:
    return rng.integers(low, high, shape).astype(dtype)


FLOAT_UNARY = ["Relu", "Sigmoid", "HardSwish", "Tanh", "Gelu", "Erf", "Exp", "Abs", "Neg",
               "Floor", "Ceil", "Sign", "Softplus", "Softsign", "Sin", "Cos", "Tan", "Sinh", "Cosh",
               "Identity", "Selu", "Elu", "LeakyRelu", "HardSigmoid", "Celu", "Mish",
               "ThresholdedRelu", "Reciprocal"]


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_unary_float(op: str) -> None:
    x = randn(4, 37) * 3
    check_op(op, [x], opset=22 if op == "Mish" else 21, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("op", ["Log", "Sqrt"])
def test_unary_positive(op: str) -> None:
    check_op(op, [np.abs(randn(3, 20)) + 0.01], rtol=2e-5)


@pytest.mark.parametrize("op,attrs", [
    ("LeakyRelu", {"alpha": 0.3}), ("Elu", {"alpha": 0.5}), ("Celu", {"alpha": 2.0}),
    ("Selu", {"alpha": 1.5, "gamma": 2.0}), ("HardSigmoid", {"alpha": 0.4, "beta": 0.3}),
    ("ThresholdedRelu", {"alpha": 0.5}), ("Gelu", {"approximate": "tanh"}),
])
def test_unary_attributes(op: str, attrs: dict) -> None:
    check_op(op, [randn(5, 19) * 3], attrs, rtol=2e-5, atol=2e-6)


def test_round_half_to_even_and_int_unary() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51], "float32")
    check_op("Round", [x])
    for op in ["Abs", "Neg", "Sign", "Relu"]:
        check_op(op, [randint(3, 18)])
    check_op("Abs", [randint(40, dtype="int64")])


def test_nan_inf_checks() -> None:
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, -3.0] * 3, "float32")
    check_op("IsNaN", [x])
    for pos, neg in [(1, 1), (1, 0), (0, 1)]:
        check_op("IsInf", [x], {"detect_positive": pos, "detect_negative": neg})


@pytest.mark.parametrize("bounds", [(-0.5, 0.7), (None, 0.2), (-0.1, None), (None, None)])
def test_clip(bounds: tuple) -> None:
    lo, hi = bounds
    consts = {1: None if lo is None else np.array(lo, "float32"),
              2: None if hi is None else np.array(hi, "float32")}
    check_op("Clip", [randn(3, 21)], const_inputs=consts, attr_names={1: "min", 2: "max"})


def test_clip_int() -> None:
    check_op("Clip", [randint(50)], const_inputs={1: np.array(-3, "int32"),
                                                  2: np.array(5, "int32")},
             attr_names={1: "min", 2: "max"})


@pytest.mark.parametrize("source,to", [
    ("float32", 6), ("float32", 7), ("float32", 9), ("float32", 11), ("float32", 2),
    ("int32", 1), ("int64", 6), ("bool", 1), ("bool", 6), ("int32", 9), ("float64", 1),
])
def test_cast(source: str, to: int) -> None:
    if source == "bool":
        x = rng.random(30) > 0.5
    elif source.startswith("int"):
        x = randint(30, dtype=source)
    else:
        x = (randn(30) * 20).astype(source)
        if to == 2:
            x = np.abs(x)
        if to == 9:
            x[::4] = 0
    check_op("Cast", [x], {"to": to})


def test_cast_like() -> None:
    check_op("CastLike", [randn(4, 5) * 10, np.zeros(1, "int64")])


def test_dropout_inference() -> None:
    x = randn(3, 17)
    y, mask = ember_run("Dropout", [x], {"ratio": 0.3})
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.bool_ and mask.all()
    check_op("Dropout", [x], const_inputs={1: np.array(0.3, "float32")},
             attr_names={1: "ratio"})


BROADCASTS = [((4, 5), (4, 5)), ((4, 5), (5,)), ((3, 1, 5), (4, 1)), ((1,), (2, 3, 33)),
              ((2, 3, 4, 20), (3, 1, 1))]


@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_arithmetic_float(op: str, shapes: tuple) -> None:
    a, b = randn(*shapes[0]), randn(*shapes[1])
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype("float32")
    check_op(op, [a, b])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_arithmetic_int(op: str, dtype: str) -> None:
    a = randint(3, 17, dtype=dtype)
    b = randint(17, low=1, high=7, dtype=dtype) * np.where(rng.random(17) > 0.5, 1, -1)
    check_op(op, [a, b.astype(dtype)])  # Div truncates toward zero, like C


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_int(fmod: int) -> None:
    a = randint(4, 9)
    b = (randint(9, low=1, high=5) * np.where(rng.random(9) > 0.5, 1, -1)).astype("int32")
    check_op("Mod", [a, b], {"fmod": fmod})


def test_mod_float() -> None:
    a = randn(4, 9) * 10
    b = (np.abs(randn(9)) + 0.5) * np.where(rng.random(9) > 0.5, 1, -1).astype("float32")
    check_op("Mod", [a, b.astype("float32")], {"fmod": 1}, rtol=1e-5, atol=1e-5)
    # fmod=0 on floats (allowed from opset 28) follows numpy: the sign of the divisor
    (got,) = ember_run("Mod", [a, b.astype("float32")], {"fmod": 0})
    np.testing.assert_allclose(got, np.mod(a, b.astype("float32")), rtol=1e-5, atol=1e-5)


def test_pow() -> None:
    check_op("Pow", [np.abs(randn(3, 18)) + 0.1, randn(18)], rtol=1e-5)
    check_op("Pow", [randn(3, 18), np.array([2], "int64")], rtol=1e-5)



def test_pow_int() -> None:
    # integer Pow goes through float64 pow(); run_op would name the kernel "pow" and shadow
    # libm's pow, so this builds the one-node kernel under another name
    from ember.graph.ir import Node, Value, tensor_type
    from ember.lowering.kernel import build_group

    a, b = randint(3, 7, low=-5, high=6), randint(7, low=0, high=4)
    x, y = Value("x", tensor_type(a.shape, a.dtype)), Value("y", tensor_type(b.shape, b.dtype))
    out = Value("z", tensor_type((3, 7), "int32"))
    module = build_group("int_pow", [Node("Pow", "p", (x, y), (out,), {})], [x, y], [out])
    got = np.zeros((3, 7), "int32")
    module(a, b, got)
    np.testing.assert_array_equal(got, onnx_run("Pow", [a, b])[0])


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
def test_variadic(op: str) -> None:
    check_op(op, [randn(2, 3, 17)])
    check_op(op, [randn(2, 3, 17), randn(3, 1), randn(17)], rtol=1e-5)
    if op in ("Min", "Max"):  # ONNX Sum and Mean take floats only
        check_op(op, [randint(4, 5), randint(5), randint(4, 1)])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons(op: str) -> None:
    check_op(op, [randint(3, 20, low=-3, high=3), randint(20, low=-3, high=3)])
    a = np.round(randn(4, 19)).astype("float32")
    check_op(op, [a, np.round(randn(4, 1)).astype("float32")])


def test_logic_and_where() -> None:
    a, b = rng.random((3, 20)) > 0.5, rng.random((20,)) > 0.5
    for op in ["And", "Or", "Xor"]:
        check_op(op, [a, b])
    check_op("Not", [a])
    check_op("Equal", [a, b])
    check_op("Where", [a, randn(3, 20), randn(1, 20)])
    check_op("Where", [b, randint(4, 1, 20), randint(20)])


def test_prelu() -> None:
    check_op("PRelu", [randn(2, 3, 4, 5), randn(3, 1, 1)])
    check_op("PRelu", [randn(4, 21), randn(21)])


def test_large_parallel_broadcast() -> None:
    # above the parallel threshold: the outer loop runs on the thread pool
    a, b = randn(64, 1000), randn(1000)
    (got,) = ember_run("Add", [a, b])
    np.testing.assert_array_equal(got, a + b)
    (got,) = ember_run("Gelu", [a])
    check_op("Gelu", [a], rtol=2e-5, atol=2e-6)


# ---------------------------------------------------------------------------------------------
def test_shape_errors_name_the_node() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (2, 3), "float32")
    y = b.input("y", (4,), "float32")
    with pytest.raises(ShapeError, match=r"node 'add' \(Add\).*do not broadcast"):
        b.add("Add", [x, y])
    i = b.input("i", (2, 3), "int32")
    with pytest.raises(ShapeError, match=r"node 'mul' \(Mul\).*types differ"):
        b.add("Mul", [x, i])
    with pytest.raises(ShapeError, match=r"node 'exp' \(Exp\).*float"):
        b.add("Exp", [i])
    with pytest.raises(ShapeError, match=r"node 'where' \(Where\).*condition must be bool"):
        b.add("Where", [i, x, x])
    with pytest.raises(ShapeError, match=r"PRelu.*slope"):
        b.add("PRelu", [x, b.input("s", (4, 2, 3), "float32")])


def test_unsupported_attributes() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (2, 3), "float32")
    with pytest.raises(UnsupportedOpError, match="fmod must be 0 or 1"):
        b.add("Mod", [x, x], {"fmod": 2})
    with pytest.raises(UnsupportedOpError, match="ONNX data type 8"):
        b.add("Cast", [x], {"to": 8})
    with pytest.raises(UnsupportedOpError, match="training_mode=1"):
        b.add("Dropout", [x], {"training_mode": 1})
    with pytest.raises(UnsupportedOpError, match="approximate"):
        b.add("Gelu", [x], {"approximate": "fast"})
    with pytest.raises(UnsupportedOpError, match="attribute 'beta' is not supported"):
        b.add("LeakyRelu", [x], {"beta": 1.0})
    with pytest.raises(UnsupportedOpError, match="required attribute 'to'"):
        b.add("Cast", [x])
