"""The real-model corpus (tests/frontend/model_corpus.py): each architecture exported with
dynamic axes is compiled once by ember.compile and matches onnxruntime at two input sizes."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
from ember.specialize import SpecializedModel  # noqa: E402

from .model_corpus import CORPUS, CorpusModel  # noqa: E402


def ops(corpus: CorpusModel) -> set[str]:
    return {node.op_type for node in corpus.model.graph.node}


def check_padding_mask(corpus: CorpusModel, compiled, outputs) -> None:
    """The mask reaches the scores: without the padding the last sequence (the padded one)
    changes, even at its real tokens, and the others do not."""
    feeds = dict(corpus.feeds[1])
    mask = feeds["attention_mask"]
    real = int(mask[-1].sum())
    assert 0 < real < mask.shape[1]
    (unpadded,) = compiled.run({**feeds, "attention_mask": np.ones_like(mask)})
    (padded,) = outputs[1]
    np.testing.assert_allclose(unpadded[:-1], padded[:-1], rtol=1e-5, atol=1e-5)
    assert np.abs(unpadded[-1, :real] - padded[-1, :real]).max() > 1e-3


def check_gpt2(corpus: CorpusModel, compiled, outputs) -> None:
    for feeds, got in zip(corpus.feeds, outputs):
        past = feeds["past_0_key"].shape[2]
        new = feeds["input_ids"].shape[1]
        assert got[1].shape[2] == past + new             # the present keys grew by `new`
        np.testing.assert_array_equal(got[1][:, :, :past], feeds["past_0_key"])


def check_yolo(corpus: CorpusModel, compiled, outputs) -> None:
    assert "NonMaxSuppression" in ops(corpus)
    kept = [got[1].shape[0] for got in outputs]
    assert all(k > 0 for k in kept) and kept[0] != kept[1]   # NMS kept boxes, not all alike


def check_qdq(corpus: CorpusModel, compiled, outputs) -> None:
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops(corpus)
    int8 = [t for t in corpus.model.graph.initializer if t.data_type == 3]   # INT8 weights
    assert len(int8) >= 5


def check_paddle(corpus: CorpusModel, compiled, outputs) -> None:
    dim = corpus.model.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.HasField("dim_value") and dim.dim_value == -1
    assert "Flatten" not in ops(corpus) and "Reshape" in ops(corpus)


def check_recurrent(op: str):
    def check(corpus: CorpusModel, compiled, outputs) -> None:
        assert op in ops(corpus)
    return check


CHECKS = {"bert": check_padding_mask, "distilbert": check_padding_mask,
          "albert": check_padding_mask, "roberta": check_padding_mask,
          "t5_encoder": check_padding_mask, "bart": check_padding_mask,
          "gpt2_past": check_gpt2, "yolo_nms": check_yolo,
          "qdq_resnet": check_qdq, "paddle_cnn": check_paddle, "rnnt": check_recurrent("LSTM"),
          "gru_tagger": check_recurrent("GRU")}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_model_two_sizes_one_compile(name):
    corpus = CORPUS[name]()
    shapes = [{n: a.shape for n, a in feeds.items()} for feeds in corpus.feeds]
    assert shapes[0] != shapes[1]
    session = ort.InferenceSession(corpus.model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    compiled = ember.compile(corpus.model)
    assert isinstance(compiled, SpecializedModel)      # dynamic axes: no input_shapes needed
    outputs = []
    for feeds in corpus.feeds:
        got = compiled.run(feeds)
        want = session.run(None, feeds)
        assert len(got) == len(want)
        for g, w, out in zip(got, want, corpus.model.graph.output):
            assert g.shape == w.shape and g.dtype == w.dtype, out.name
            np.testing.assert_allclose(g, w, rtol=corpus.rtol, atol=corpus.atol,
                                       err_msg=f"{name}: output {out.name}")
        outputs.append(got)
    compiles = compiled.compiles
    again = compiled.run(corpus.feeds[0])              # a size seen before: no compile
    assert compiled.compiles == compiles
    for a, b in zip(again, outputs[0]):
        np.testing.assert_array_equal(a, b)
    if name in CHECKS:
        CHECKS[name](corpus, compiled, outputs)
