"""Models exported by torch.onnx.export (and transformers) from random-init configs, with
symbolic batch and sequence axes: one compiled model runs two input sizes, checked against
onnxruntime. Exported here, in the test: nothing big is committed."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest

import ember

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


def export(module, args, names, dynamic_axes, opset=17):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, buffer, input_names=names,
                          dynamic_axes=dynamic_axes, opset_version=opset, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


def check_sizes(model, feeds_list, rtol=1e-4, atol=1e-5):
    compiled = ember.compile(model)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        got = compiled.run(feeds)
        want = session.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return compiled


class _LSTMTagger(torch.nn.Module):
    """An RNN-T style encoder: the zero initial state is built from the input's batch."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 6, batch_first=True)
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        h0 = torch.zeros(1, x.shape[0], 6)
        c0 = torch.zeros(1, x.shape[0], 6)
        y, _ = self.lstm(x, (h0, c0))
        return self.fc(y)


def test_lstm_with_zero_initial_state_two_sizes():
    torch.manual_seed(0)
    model = export(_LSTMTagger(), (torch.randn(2, 5, 4),), ["x"],
                   {"x": {0: "batch", 1: "seq"}})
    rng = np.random.default_rng(0)
    check_sizes(model, [{"x": rng.standard_normal((2, 5, 4)).astype(np.float32)},
                        {"x": rng.standard_normal((3, 9, 4)).astype(np.float32)}])


def test_bert_with_padding_mask_two_sizes():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=32)
    torch.manual_seed(1)
    bert = transformers.BertModel(config, add_pooling_layer=False)

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask):
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.randint(0, 50, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.int64)
    model = export(Encoder(), (ids, mask), ["input_ids", "attention_mask"],
                   {"input_ids": {0: "batch", 1: "seq"},
                    "attention_mask": {0: "batch", 1: "seq"}}, opset=14)
    rng = np.random.default_rng(1)
    feeds = []
    for batch, seq in ((2, 6), (3, 11)):
        mask = np.ones((batch, seq), np.int64)
        mask[-1, seq // 2:] = 0                       # the last sequence is padded
        feeds.append({"input_ids": rng.integers(0, 50, (batch, seq)).astype(np.int64),
                      "attention_mask": mask})
    check_sizes(model, feeds)
