"""Zoo models: valid ONNX, run in onnxruntime with sane values, deterministic, saved atomically."""

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ember.errors import EmberError
from ember.zoo import MODELS, ZooError, build_model, random_inputs, save_model

ort = pytest.importorskip("onnxruntime")


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None,
        extra_outputs: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Run in onnxruntime (optionally exposing intermediate tensors); outputs by name."""
    if extra_outputs:
        model = onnx.ModelProto.FromString(model.SerializeToString())
        for name in extra_outputs:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds or random_inputs(model))))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def assert_sane(x: np.ndarray) -> None:
    """Finite, not constant, not exploding."""
    assert np.isfinite(x).all()
    assert 1e-2 < x.std() < 50, x.std()
    assert np.abs(x).max() < 1e3


def trainable_params(model: onnx.ModelProto) -> int:
    """Parameters as torchvision / transformers count them (no BN statistics, no constants)."""
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer
               if not t.name.startswith("const_") and "running_" not in t.name)


def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


CASES = [
    ("resnet18", {"image_size": 64}, "output", (1, 1000)),
    ("resnet50", {"image_size": 64}, "output", (1, 1000)),
    ("mobilenet_v2", {"image_size": 96}, "output", (1, 1000)),
    ("squeezenet", {"image_size": 64}, "output", (1, 1000)),
    ("bert-tiny", {}, "last_hidden_state", (1, 32, 128)),
    ("lstm_lm", {"seq_len": 16, "vocab": 1000}, "logits", (1, 16, 1000)),
]


@pytest.mark.parametrize(("name", "config", "output", "shape"), CASES,
                         ids=[c[0] for c in CASES])
def test_model_checks_and_runs(name: str, config: dict, output: str, shape: tuple) -> None:
    model = build_model(name, **config)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    y = run(model)[output]
    assert y.shape == shape and y.dtype == np.float32
    assert_sane(y)
    if name != "bert-tiny":  # logits: a softmax over them is neither flat nor one-hot
        p = softmax(y.astype(np.float64))
        assert p.max() < 0.99 and p.max(-1).min() > 2.0 / shape[-1]


@pytest.mark.parametrize(("name", "count", "convs"), [
    ("resnet18", 11_689_512, 20), ("resnet50", 25_557_032, 53),
    ("mobilenet_v2", 3_504_872, 52), ("squeezenet", 1_235_496, 26)])
def test_cnn_structure_matches_torchvision(name: str, count: int, convs: int) -> None:
    model = build_model(name, image_size=32)
    assert trainable_params(model) == count
    assert ops(model).count("Conv") == convs


def test_cnn_layout_details() -> None:
    mobile = build_model("mobilenet_v2", image_size=32)
    groups = [a.i for n in mobile.graph.node for a in n.attribute if a.name == "group"]
    assert len(groups) == 17 and min(groups) == 32
    assert "Relu" not in ops(mobile) and ops(mobile).count("Clip") == 35
    squeeze = build_model("squeezenet", image_size=224)
    pools = [n for n in squeeze.graph.node if n.op_type == "MaxPool"]
    assert len(pools) == 3 and all(a.i == 1 for n in pools for a in n.attribute
                                   if a.name == "ceil_mode")
    assert ops(squeeze).count("Concat") == 8
    avg = next(n for n in squeeze.graph.node if n.op_type == "AveragePool")
    assert list(avg.attribute[0].ints) == [13, 13]  # 224 -> 111 -> 55 -> 27 -> 13


def test_bert_base_size_and_ops() -> None:
    model = build_model("bert-base", pooler=True)
    assert trainable_params(model) == 109_482_240  # bert-base-uncased
    kinds = ops(model)
    assert kinds.count("Softmax") == 12 and kinds.count("LayerNormalization") == 25
    assert kinds.count("Erf") == 12 and "Gelu" not in kinds
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask"]


def test_bert_attention_is_masked_and_not_one_hot() -> None:
    model = build_model("bert-tiny")
    softmaxes = tuple(n.output[0] for n in model.graph.node if n.op_type == "Softmax")
    feeds = random_inputs(model)
    out = run(model, feeds, softmaxes)
    valid = int(feeds["attention_mask"].sum())
    assert 0 < valid < 32
    for name in softmaxes:
        p = out[name]
        assert p.shape == (1, 2, 32, 32)
        np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-5)
        assert np.abs(p[..., valid:]).max() < 1e-6   # masked keys get no attention
        assert 1.5 / valid < p.max(-1).mean() and p.max() < 0.95
    # Changing a masked token changes nothing at the valid positions.
    changed = dict(feeds, input_ids=feeds["input_ids"].copy())
    changed["input_ids"][0, -1] = (changed["input_ids"][0, -1] + 1) % 1000
    other = run(model, changed)["last_hidden_state"]
    np.testing.assert_allclose(other[:, :valid], out["last_hidden_state"][:, :valid],
                               rtol=1e-5, atol=1e-5)
    assert not np.allclose(other[:, valid:], out["last_hidden_state"][:, valid:])


def test_bert_options_and_batch() -> None:
    model = build_model("bert-tiny", batch=2, token_type_ids=True, pooler=True, layers=1)
    onnx.checker.check_model(model, full_check=True)
    feeds = random_inputs(model)
    assert set(feeds) == {"input_ids", "attention_mask", "token_type_ids"}
    out = run(model, feeds)
    assert out["last_hidden_state"].shape == (2, 32, 128)
    pooled = out["pooler_output"]
    assert pooled.shape == (2, 128) and np.abs(pooled).max() <= 1.0
    assert_sane(pooled)
    types = dict(feeds, token_type_ids=np.zeros_like(feeds["token_type_ids"]))
    assert not np.allclose(run(model, types)["last_hidden_state"], out["last_hidden_state"])


@pytest.mark.parametrize(("name", "config", "low"), [
    ("bert-tiny", {}, 13), ("bert-tiny", {}, 11), ("lstm_lm", {"seq_len": 8}, 11),
    ("mobilenet_v2", {"image_size": 32}, 11)])
def test_older_opsets_give_the_same_numbers(name: str, config: dict, low: int) -> None:
    new, old = build_model(name, **config), build_model(name, opset=low, **config)
    onnx.checker.check_model(old, full_check=True)
    if name.startswith("bert"):
        assert "LayerNormalization" not in ops(old) and "ReduceMean" in ops(old)
    feeds = random_inputs(new)
    for a, b in zip(run(new, feeds).values(), run(old, feeds).values()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_newer_opset_builds() -> None:
    model = build_model("bert-tiny", layers=1, opset=18)
    onnx.checker.check_model(model, full_check=True)
    assert_sane(run(model)["last_hidden_state"])


def test_lstm_layers_and_layout() -> None:
    model = build_model("lstm_lm", layers=1, seq_len=8, vocab=50, hidden=32, embed=16,
                        batch=3)
    assert ops(model).count("LSTM") == 1 and ops(model).count("Transpose") == 2
    feeds = random_inputs(model)
    assert feeds["input_ids"].shape == (3, 8) and feeds["input_ids"].max() < 50
    logits = run(model, feeds)["logits"]
    assert logits.shape == (3, 8, 50)
    assert_sane(logits)
    # Batch rows are independent and the LSTM is causal: changing the last token of row 0
    # changes only row 0's last position.
    changed = dict(input_ids=feeds["input_ids"].copy())
    changed["input_ids"][0, -1] = (changed["input_ids"][0, -1] + 1) % 50
    other = run(model, changed)["logits"]
    np.testing.assert_allclose(other[1:], logits[1:], rtol=1e-6)
    np.testing.assert_allclose(other[0, :-1], logits[0, :-1], rtol=1e-6)
    assert not np.allclose(other[0, -1], logits[0, -1])


def test_deterministic_and_seeded() -> None:
    a = build_model("resnet18", image_size=32)
    b = build_model("resnet18", image_size=32)
    assert a.SerializeToString() == b.SerializeToString()
    c = build_model("resnet18", image_size=32, seed=1)
    wa = numpy_helper.to_array(a.graph.initializer[0])
    wc = numpy_helper.to_array(c.graph.initializer[0])
    assert wa.shape == wc.shape == (64, 3, 7, 7) and not np.array_equal(wa, wc)
    np.testing.assert_allclose(wa.std(), np.sqrt(2 / 147), rtol=0.1)  # He init
    assert random_inputs(a, seed=3)["input"].tobytes() == random_inputs(b, seed=3)[
        "input"].tobytes()


def test_random_inputs() -> None:
    feeds = random_inputs(build_model("bert-tiny", batch=2, token_type_ids=True))
    ids, mask, types = feeds["input_ids"], feeds["attention_mask"], feeds["token_type_ids"]
    assert ids.dtype == mask.dtype == types.dtype == np.int64
    assert ids.min() >= 0 and ids.max() < 1000 and len(np.unique(ids)) > 20
    assert (mask[:, :28] == 1).all() and (mask[:, 28:] == 0).all()
    assert (types[:, :16] == 0).all() and (types[:, 16:] == 1).all()
    image = random_inputs(build_model("squeezenet", image_size=64, batch=2))["input"]
    assert image.shape == (2, 3, 64, 64) and image.dtype == np.float32
    assert abs(image.mean()) < 0.05 and abs(image.std() - 1) < 0.05


def test_save_model(tmp_path) -> None:
    path = tmp_path / "tiny.onnx"
    assert save_model("bert-tiny", path, layers=1) == str(path)
    loaded = onnx.load(str(path))
    onnx.checker.check_model(loaded, full_check=True)
    assert loaded.SerializeToString() == build_model("bert-tiny", layers=1).SerializeToString()
    assert os.listdir(tmp_path) == ["tiny.onnx"]
    (tmp_path / "taken").mkdir()
    with pytest.raises(OSError):  # the target is a directory: nothing is left behind
        save_model("squeezenet", tmp_path / "taken", image_size=32)
    assert sorted(os.listdir(tmp_path)) == ["taken", "tiny.onnx"]
    with pytest.raises(ZooError, match="unknown model"):
        save_model("nope", tmp_path / "x.onnx")
    assert sorted(os.listdir(tmp_path)) == ["taken", "tiny.onnx"]


def test_registry() -> None:
    assert set(MODELS) == {"resnet18", "resnet50", "mobilenet_v2", "squeezenet", "bert",
                           "bert-base", "bert-tiny", "lstm_lm"}
    tiny = build_model("bert-tiny", layers=1)
    assert [d.dim_value for d in tiny.graph.output[0].type.tensor_type.shape.dim] == [1, 32, 128]


@pytest.mark.parametrize(("name", "config", "match"), [
    ("resnet", {}, r"unknown model 'resnet'; known models: resnet18, resnet50, .*lstm_lm"),
    ("resnet18", {"image": 64}, r"model 'resnet18': unknown config key\(s\) image; "
                                r"accepted: batch, image_size"),
    ("bert-tiny", {"hidden": 100, "heads": 3}, r"hidden \(100\) must be a multiple of heads"),
    ("bert", {"seq_len": 600}, r"seq_len \(600\) exceeds max_position \(512\)"),
    ("bert-tiny", {"layers": 0}, r"'layers' must be a positive int, got 0"),
    ("lstm_lm", {"hidden": 2.5}, r"'hidden' must be a positive int, got 2.5"),
    ("resnet50", {"image_size": 16}, r"image_size must be at least 32, got 16"),
    ("squeezenet", {"opset": 9}, r"opset must be an int in \[11, \d+\], got 9"),
    ("mobilenet_v2", {"width_mult": 0}, r"width_mult must be a number in \(0, 4\], got 0"),
    ("lstm_lm", {"seed": -1}, r"seed must be an int >= 0, got -1"),
])
def test_errors(name: str, config: dict, match: str) -> None:
    with pytest.raises(ZooError, match=match) as info:
        build_model(name, **config)
    assert isinstance(info.value, EmberError)
