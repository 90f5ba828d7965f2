"""An LSTM language model: embedding Gather, stacked ONNX LSTM ops, vocabulary projection."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ember.zoo.builder import GraphBuilder, check_config


def lstm_lm(*, layers: int = 2, hidden: int = 256, embed: int = 256, seq_len: int = 64,
            vocab: int = 10000, batch: int = 1, opset: int = 17, seed: int = 0
            ) -> onnx.ModelProto:
    """LSTM LM: 'input_ids' int64 [batch, seq_len] -> 'logits' [batch, seq_len, vocab].

    The ONNX LSTM is sequence-major, so a Transpose goes on each side of the stack.
    """
    check_config("lstm_lm", layers=layers, hidden=hidden, embed=embed, seq_len=seq_len,
                 vocab=vocab, batch=batch)
    b = GraphBuilder("lstm_lm", opset, seed)
    ids = b.input("input_ids", np.int64, [batch, seq_len])
    table = b.weight("embedding.weight", b.normal((vocab, embed), std=1.0))
    x = b.node("Gather", [table, ids], name="embedding", axis=0)    # [batch, seq, embed]
    x = b.node("Transpose", [x], name="to_seq_major", perm=[1, 0, 2])  # [seq, batch, embed]
    # Weights are scaled so that gate pre-activations have a standard deviation near 1:
    # the embedding is N(0, 1) but later layers see hidden states of rms about 0.3.
    cin, x_rms = embed, 1.0
    for i in range(layers):
        p = f"lstm.{i}"
        w_std, r_std = 1.0 / (x_rms * math.sqrt(cin)), 1.0 / (0.3 * math.sqrt(hidden))
        w = b.weight(f"{p}.W", b.normal((1, 4 * hidden, cin), std=w_std))
        r = b.weight(f"{p}.R", b.normal((1, 4 * hidden, hidden), std=0.5 * r_std))
        bias = b.weight(f"{p}.B", b.normal((1, 8 * hidden), std=0.2))
        y = b.node("LSTM", [x, w, r, bias], name=p, hidden_size=hidden)  # [seq, 1, batch, h]
        x = b.squeeze(y, [1], name=f"{p}.squeeze")
        cin, x_rms = hidden, 0.3
    x = b.node("Transpose", [x], name="to_batch_major", perm=[1, 0, 2])  # [batch, seq, h]
    decoder_std = 2.0 / (x_rms * math.sqrt(hidden))  # logits of std ~2
    w = b.weight("decoder.weight", b.normal((hidden, vocab), std=decoder_std))
    bias = b.weight("decoder.bias", b.normal((vocab,), std=0.1))
    x = b.node("MatMul", [x, w], name="decoder.matmul")
    b.output(b.node("Add", [x, bias], name="decoder.add_bias", output="logits"),
             np.float32, [batch, seq_len, vocab])
    doc = (f"lstm_lm: {layers} layers, hidden {hidden}, embed {embed}, seq {seq_len}, "
           f"vocab {vocab}; random weights (seed {seed})")
    return b.build(doc, {"vocab_size": str(vocab)})
