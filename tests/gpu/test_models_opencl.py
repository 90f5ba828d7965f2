"""Whole zoo models compiled for OpenCL match onnxruntime; a run copies each tensor once."""

import numpy as np
import pytest

import ember
from ember.zoo import build_model, random_inputs


def ort_outputs(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


class CountingDevice:
    """The real device, counting host<->device copies."""

    def __init__(self, device):
        self.device = device
        self.copies_in = self.copies_out = 0

    def copy_in(self, *args, **kwargs):
        self.copies_in += 1
        return self.device.copy_in(*args, **kwargs)

    def copy_out(self, *args, **kwargs):
        self.copies_out += 1
        return self.device.copy_out(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.device, name)


# every zoo model (lstm_lm below, bert-base is bert), small inputs; the heavy ones (many
# distinct kernels for PoCL to compile, or bert-base's 768-wide layers) are marked
ZOO = [("resnet18", {"image_size": 32}),
       ("bert-tiny", {"layers": 1}),
       ("squeezenet", {"image_size": 32}),
       pytest.param("resnet50", {"image_size": 32}, marks=pytest.mark.heavy),
       pytest.param("mobilenet_v2", {"image_size": 32}, marks=pytest.mark.heavy),
       ("bert", {"layers": 1, "seq_len": 16})]


def test_every_zoo_model_runs_here():
    from ember.zoo import MODELS

    names = {p.values[0] if hasattr(p, "values") else p[0] for p in ZOO}
    same = {"bert-base": "bert"}  # one builder, two names
    assert {same.get(n, n) for n in MODELS} <= names | {"lstm_lm"}


@pytest.mark.parametrize("name,config", ZOO)
def test_zoo_model_matches_onnxruntime(opencl, name, config):
    from ember.driver_gpu import compile_gpu
    from ember.runtime.devices import default_device
    from ember.target import Target

    model = build_model(name, **config)
    feeds = random_inputs(model, seed=0)
    device = CountingDevice(default_device("opencl"))
    compiled = compile_gpu(model, Target("opencl"), device=device)
    loaded = device.copies_in  # the weights, once
    outputs = compiled.run(feeds)
    for got, ref in zip(outputs, ort_outputs(model, feeds)):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert device.copies_in - loaded == len(feeds)
    assert device.copies_out == len(outputs)


def test_compile_front_door(opencl):
    model = build_model("bert-tiny", layers=1)
    compiled = ember.compile(model, target="opencl")
    assert type(compiled).__name__ == "DeviceModel"
    with pytest.raises(ember.errors.ArgumentError, match="expects inputs"):
        compiled.run({"nonsense": np.zeros(1)})


def test_generate_only_kinds_say_so():
    model = build_model("bert-tiny", layers=1)
    with pytest.raises(ember.errors.EmberError, match="target kind 'metal' generates code only"):
        ember.compile(model, target="metal")


def test_lstm_lm_matches_onnxruntime(opencl, tmp_path):
    """Two stacked LSTMs: each a projection GEMM plus per-step launches on the device."""
    model = build_model("lstm_lm", layers=2, hidden=32, embed=16, seq_len=8, vocab=50,
                        batch=2)
    feeds = random_inputs(model, seed=0)
    (ref,) = ort_outputs(model, feeds)
    for _ in range(2):  # lowered, then every group (its per-step launches too) from the cache
        compiled = ember.compile(model, target="opencl", cache=str(tmp_path))
        (got,) = compiled.run(feeds)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert compiled.stats["cached"] == compiled.stats["groups"]
