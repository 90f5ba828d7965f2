"""Conversions to and from bfloat16, float8, float4e2m1 and the 4- and 2-bit integers
(ember.ops.lowp), checked against ml_dtypes (and onnx's float8e8m0 helper) on every bit
pattern, edge values and seeded random values, through compiled (vectorized) kernels."""

import warnings

import ml_dtypes
import numpy as np
import pytest
from onnx.numpy_helper import to_float8e8m0

from ember import dtype as dt
from ember import te
from ember.errors import DTypeError, UnsupportedOpError
from ember.lowering.kernel import run_op

rng = np.random.default_rng(7)

# ONNX data type code, ml_dtypes container
FLOATS = {"bfloat16": (16, ml_dtypes.bfloat16), "float8e4m3fn": (17, ml_dtypes.float8_e4m3fn),
          "float8e4m3fnuz": (18, ml_dtypes.float8_e4m3fnuz),
          "float8e5m2": (19, ml_dtypes.float8_e5m2),
          "float8e5m2fnuz": (20, ml_dtypes.float8_e5m2fnuz),
          "float4e2m1": (23, ml_dtypes.float4_e2m1fn)}
INTS = {"uint4": (21, ml_dtypes.uint4), "int4": (22, ml_dtypes.int4),
        "uint2": (25, ml_dtypes.uint2), "int2": (26, ml_dtypes.int2)}
FLOAT8 = [n for n in FLOATS if n.startswith("float8")]


def _patterns(name: str) -> np.ndarray:
    container = FLOATS.get(name, INTS.get(name, (0, None)))[1]
    width = {"bfloat16": 16, "float4e2m1": 4}.get(name, 8)
    if name in INTS:
        width = int(name[-1])
    bits = np.arange(1 << width, dtype=np.uint16 if width == 16 else np.uint8)
    return bits.view(container)


def _edge_and_random(dtype: str) -> np.ndarray:
    edges = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 448, 464, 465, 480, 240, 248,
             57344, 61440, 65504, 6, 5, 7, 0.25, 0.75, 2 ** -9, 2 ** -10, 1.5 * 2 ** -9,
             2 ** -16, 2 ** -17, 3 * 2 ** -18, 1e-9, 1e-40, 3.0e38, -3.0e38, 1e6, -1e6]
    values = [rng.standard_normal(300) * scale for scale in (1e-5, 1e-3, 0.1, 1, 10, 300,
                                                             1e4, 1e6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow to inf in float16 is wanted
        return np.concatenate([np.array(edges), *values]).astype(dtype)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"uint{a.dtype.itemsize * 8}")


def _same_floats(got: np.ndarray, want: np.ndarray) -> None:
    """Equal patterns, except that any NaN matches any NaN."""
    assert got.dtype == want.dtype
    g, w = got.astype(np.float32), want.astype(np.float32)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("name", [*FLOATS, *INTS])
@pytest.mark.parametrize("to", ["float32", "float16"])
def test_decode_every_pattern(name: str, to: str) -> None:
    x = _patterns(name)
    code = {"float32": 1, "float16": 10}[to]
    (got,) = run_op("Cast", [x], {"to": code})
    want = x.astype(to)            # exact for float32; float16 rounds e8m0 and bf16 only
    if name in INTS:
        np.testing.assert_array_equal(got, want)
    else:
        _same_floats(got, want)


@pytest.mark.parametrize("name", list(FLOATS))
@pytest.mark.parametrize("source", ["float32", "float16", "float64"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_encode_rounds_to_nearest_even(name: str, source: str, saturate: int) -> None:
    code, container = FLOATS[name]
    x = _edge_and_random(source)
    (got,) = run_op("Cast", [x], {"to": code, "saturate": saturate})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in FLOAT8 and saturate:   # ONNX: out of range (and inf) -> the largest value
            info = ml_dtypes.finfo(container)
            x = np.clip(x, np.array(info.min, source), np.array(info.max, source))
        want = x.astype(container)
    if name == "float4e2m1":          # no NaN: ember gives +0 (ml_dtypes: a signed zero)
        want[np.isnan(x)] = 0
    _same_floats(got, want)


@pytest.mark.parametrize("name", FLOAT8)
def test_non_saturating_overflow_follows_the_onnx_table(name: str) -> None:
    code, container = FLOATS[name]
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan], np.float32)
    (got,) = run_op("Cast", [x], {"to": code, "saturate": 0})
    y = got.astype(np.float32)
    if name == "float8e5m2":
        np.testing.assert_array_equal(y[:4], [np.inf, -np.inf, np.inf, -np.inf])
        assert np.isnan(y[4])
    else:
        assert np.isnan(y).all()
    (sat,) = run_op("Cast", [x], {"to": code, "saturate": 1})
    top = float(ml_dtypes.finfo(container).max)
    np.testing.assert_array_equal(sat.astype(np.float32)[:4], [top, -top, top, -top])


@pytest.mark.parametrize("name", ["float8e4m3fnuz", "float8e5m2fnuz"])
def test_fnuz_has_no_negative_zero(name: str) -> None:
    code, _ = FLOATS[name]
    (got,) = run_op("Cast", [np.array([-0.0, -1e-30, 0.0], np.float32)], {"to": code})
    np.testing.assert_array_equal(_bits(got), [0, 0, 0])


def test_float8_to_float8_rounds_once() -> None:
    x = _patterns("float8e4m3fn")
    (got,) = run_op("Cast", [x], {"to": 19, "saturate": 1})      # e4m3fn -> e5m2
    finite = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = finite.astype(ml_dtypes.float8_e5m2)
    _same_floats(got, want)


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_float8e8m0_matches_onnx_rounding(round_mode: str, saturate: int) -> None:
    x = np.abs(_edge_and_random("float32"))
    x = np.concatenate([x, np.ldexp(np.float32(1), np.arange(-130, 129)).astype(np.float32),
                        np.float32(1.5) * np.ldexp(np.float32(1), np.arange(-126, 128))])
    (got,) = run_op("Cast", [x], {"to": 24, "saturate": saturate, "round_mode": round_mode})
    want = to_float8e8m0(x, saturate=bool(saturate), round_mode=round_mode)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_float8e8m0_decodes_powers_of_two() -> None:
    x = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    (got,) = run_op("Cast", [x], {"to": 1})
    want = np.ldexp(np.float64(1), np.arange(256) - 127).astype(np.float32)
    np.testing.assert_array_equal(got[:255], want[:255])
    assert np.isnan(got[255])


@pytest.mark.parametrize("name", list(INTS))
@pytest.mark.parametrize("source", ["float32", "float16"])
def test_floats_to_narrow_ints_truncate(name: str, source: str) -> None:
    code, container = INTS[name]
    x = np.concatenate([np.arange(-20, 20, 0.25), [np.nan, np.inf, -np.inf, -0.0],
                        rng.uniform(-10, 17, 100)]).astype(source)
    (got,) = run_op("Cast", [x], {"to": code})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = x.astype(container)     # truncation; 0 when NaN or out of range
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("name", list(INTS))
def test_integers_to_narrow_ints_keep_the_low_bits(name: str) -> None:
    code, container = INTS[name]
    width = int(name[-1])
    x = rng.integers(-300, 300, 200).astype(np.int32)
    (got,) = run_op("Cast", [x], {"to": code})
    low = (x % (1 << width)).astype(np.uint8)          # ONNX: discard the higher bits
    np.testing.assert_array_equal(_bits(got), low)
    (back,) = run_op("Cast", [got], {"to": 6})
    want = low.view(container).astype(np.int32)
    np.testing.assert_array_equal(back, want)


@pytest.mark.parametrize("name", ["bfloat16", "float8e4m3fn", "int4"])
def test_bool_to_and_from_storage_types(name: str) -> None:
    code, container = {**FLOATS, **INTS}[name]
    x = rng.integers(0, 2, 50).astype(bool)
    (got,) = run_op("Cast", [x], {"to": code})
    np.testing.assert_array_equal(got.astype(np.float32), x.astype(np.float32))
    (back,) = run_op("Cast", [got], {"to": 9})
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize("source,to", [("float32", "int32"), ("int32", "float32"),
                                       ("float64", "int64"), ("uint16", "int16"),
                                       ("int8", "uint8")])
def test_bitcast_reinterprets_the_bits(source: str, to: str) -> None:
    codes = {"float32": 1, "int32": 6, "float64": 11, "int64": 7, "int16": 5, "uint8": 2}
    x = (rng.standard_normal(77) * 1000).astype(source)
    (got,) = run_op("BitCast", [x], {"to": codes[to]})
    np.testing.assert_array_equal(got, x.view(to))


def test_bitcast_to_bfloat16_keeps_the_pattern() -> None:
    x = rng.integers(0, 1 << 16, 40).astype(np.uint16)
    (got,) = run_op("BitCast", [x], {"to": 16})
    np.testing.assert_array_equal(got.view(np.uint16), x)


def test_bitcast_of_different_widths_is_an_error() -> None:
    with pytest.raises(UnsupportedOpError, match="BitCast: float32 and int16 differ in width"):
        run_op("BitCast", [np.zeros(3, np.float32)], {"to": 5})


def test_unknown_round_mode_is_an_error() -> None:
    with pytest.raises(UnsupportedOpError, match="round_mode='sideways' is not supported"):
        run_op("Cast", [np.zeros(3, np.float32)], {"to": 24, "round_mode": "sideways"})


def test_storage_types_refuse_arithmetic_casts_and_promotion() -> None:
    x = te.placeholder((4,), "bfloat16", name="x")
    with pytest.raises(DTypeError, match="storage types convert with ember.ops.lowp"):
        x[0].astype("float32")
    with pytest.raises(DTypeError, match="reinterpret needs types of one width"):
        te.reinterpret(x[0], "uint8")
    with pytest.raises(DTypeError, match="bfloat16 is a storage type"):
        dt.promote(dt.bfloat16, dt.float32)


def test_dtype_names_storage_and_containers() -> None:
    assert dt.parse("float8e4m3fnx16") == dt.float8e4m3fn.with_lanes(16)
    assert dt.parse(np.dtype(ml_dtypes.float8_e5m2)) == dt.float8e5m2
    assert dt.parse(np.dtype(ml_dtypes.int4)) == dt.int4
    assert dt.int4.storage == dt.uint8 and dt.int4.compute == dt.int8
    assert dt.bfloat16.storage == dt.uint16 and dt.bfloat16.compute == dt.float32
    assert dt.numpy_dtype("float4e2m1") == np.dtype(ml_dtypes.float4_e2m1fn)
    assert dt.float4e2m1.storage_bytes == 1


@pytest.mark.parametrize("name", ["bfloat16", "float8e4m3fnuz", "float8e5m2", "int4"])
def test_portable_c_gives_the_same_bits(name: str) -> None:
    code, _ = {**FLOATS, **INTS}[name]
    x = _edge_and_random("float32")[::7]
    (llvm,) = run_op("Cast", [x], {"to": code})
    (c,) = run_op("Cast", [x], {"to": code}, target="c")
    np.testing.assert_array_equal(_bits(c), _bits(llvm))
    (back,) = run_op("Cast", [c], {"to": 1}, target="c")
    np.testing.assert_array_equal(back, llvm.astype(np.float32))
    (bits,) = run_op("BitCast", [x], {"to": 6}, target="c")
    np.testing.assert_array_equal(bits, x.view(np.int32))
