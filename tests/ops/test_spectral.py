"""DFT against numpy.fft over real / complex input, axes, lengths, inverse and onesided."""

import numpy as np
import pytest

from ember.errors import ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import ember_run

rng = np.random.default_rng(31)


def _complex(y: np.ndarray) -> np.ndarray:
    return y[..., 0] + 1j * y[..., 1]


@pytest.mark.parametrize("axis", [1, 2, -2, -3])
@pytest.mark.parametrize("components", [1, 2])
def test_dft_matches_numpy(axis: int, components: int) -> None:
    x = rng.standard_normal((2, 6, 5, components)).astype("float32")
    (got,) = ember_run("DFT", [x], {"axis": axis})
    signal = x[..., 0] if components == 1 else _complex(x.astype("float64"))
    spatial = axis % 4
    np.testing.assert_allclose(_complex(got), np.fft.fft(signal, axis=spatial), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("length", [4, 9])
def test_dft_length_truncates_or_pads(length: int) -> None:
    x = rng.standard_normal((3, 7, 2)).astype("float64")
    (got,) = ember_run("DFT", [x], {"axis": 1, "dft_length": length})
    np.testing.assert_allclose(_complex(got), np.fft.fft(_complex(x), n=length, axis=1),
                               rtol=1e-12, atol=1e-12)


def test_inverse_and_onesided() -> None:
    x = rng.standard_normal((2, 8, 2)).astype("float64")
    (inverse,) = ember_run("DFT", [x], {"axis": 1, "inverse": 1})
    np.testing.assert_allclose(_complex(inverse), np.fft.ifft(_complex(x), axis=1), atol=1e-12)
    real = rng.standard_normal((2, 9, 1)).astype("float32")
    (half,) = ember_run("DFT", [real], {"axis": 1, "onesided": 1})
    assert half.shape == (2, 5, 2)
    np.testing.assert_allclose(_complex(half), np.fft.rfft(real[..., 0], axis=1), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("length", [None, 10, 11])
def test_inverse_of_a_onesided_spectrum_is_real(length: int | None) -> None:
    spectrum = rng.standard_normal((3, 6, 2)).astype("float64")
    attrs = {"axis": 1, "inverse": 1, "onesided": 1, "dft_length": length}
    (got,) = ember_run("DFT", [spectrum], attrs)
    expected = np.fft.irfft(_complex(spectrum), n=length, axis=1)
    assert got.shape == (*expected.shape, 1)
    np.testing.assert_allclose(got[..., 0], expected, atol=1e-12)


def test_dft_errors() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (2, 6, 2), "float32")
    with pytest.raises(ShapeError, match=r"DFT: axis 2 is not a signal axis of shape"):
        b.add("DFT", [x], {"axis": 2})
    with pytest.raises(ShapeError, match=r"DFT: axis -1 is not a signal axis"):
        b.add("DFT", [x], {"axis": -1})
    with pytest.raises(ShapeError, match=r"last axis must hold 1 \(real\) or 2 \(complex\)"):
        b.add("DFT", [b.input("y", (2, 6, 3), "float32")], {"axis": 1})
    with pytest.raises(UnsupportedOpError, match=r"DFT: inverse must be 0 or 1, got 2"):
        b.add("DFT", [x], {"axis": 1, "inverse": 2})
    with pytest.raises(ShapeError, match=r"DFT: dft_length must be one positive integer"):
        b.add("DFT", [x], {"axis": 1, "dft_length": 0})
    with pytest.raises(ShapeError, match=r"one-sided spectrum of 1 points .* has no inverse"):
        b.add("DFT", [b.input("z", (2, 1, 2), "float32")],
              {"axis": 1, "inverse": 1, "onesided": 1})
    with pytest.raises(ShapeError, match=r"DFT needs a float input, got int32"):
        b.add("DFT", [b.input("i", (2, 6, 2), "int32")], {"axis": 1})


@pytest.mark.parametrize("length, step, windowed, components, onesided", [
    (16, 8, False, 1, 1),
    (16, 5, True, 1, 1),
    (12, 4, True, 1, 0),
    (10, 3, False, 2, 0),
    (9, 4, True, 2, 0),
])
def test_stft_matches_onnxruntime(length, step, windowed, components, onesided) -> None:
    from tests.ops.onnx_ref import check_op

    rng = np.random.default_rng(length * step)
    signal = rng.standard_normal((2, 50, components)).astype("float32")
    window = rng.random(length).astype("float32") if windowed else None
    consts = {1: np.array(step, "int64"),
              3: None if windowed else np.array(length, "int64")}
    inputs = [signal, window] if windowed else [signal, None]
    check_op("STFT", inputs, {"onesided": onesided}, opset=17, const_inputs=consts,
             attr_names={1: "frame_step", 3: "frame_length"}, rtol=1e-4, atol=1e-4)


def test_stft_errors() -> None:
    b = GraphBuilder("bad")
    x = b.input("x", (1, 20, 1), "float32")
    with pytest.raises(ShapeError, match="give a window or a positive frame_length"):
        b.add("STFT", [x, None], {"frame_step": 2})
    with pytest.raises(ShapeError, match="do not fit"):
        b.add("STFT", [x, None], {"frame_step": 2, "frame_length": 30})
    z = b.input("z", (1, 20, 2), "float32")
    with pytest.raises(UnsupportedOpError, match="onesided=1 needs a real signal"):
        b.add("STFT", [z, None], {"frame_step": 2, "frame_length": 4})
