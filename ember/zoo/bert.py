"""A BERT encoder written op by op (MatMul attention, erf GELU, LayerNorm), random weights."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ember.zoo.builder import GraphBuilder, ZooError, check_config

_STD = 0.02  # BERT's initializer range


def _linear(b: GraphBuilder, x: str, cin: int, cout: int, name: str, std: float = _STD
            ) -> str:
    """x @ W + bias, W stored [cin, cout] as a MatMul right operand."""
    w = b.weight(f"{name}.weight", b.normal((cin, cout), std=std))
    bias = b.weight(f"{name}.bias", b.normal((cout,), std=_STD))
    return b.node("Add", [b.node("MatMul", [x, w], name=f"{name}.matmul"), bias],
                  name=f"{name}.add_bias")


def _layer_norm(b: GraphBuilder, x: str, hidden: int, name: str, eps: float,
                output: str | None = None) -> str:
    """LayerNorm with scale near 1 and a small shift (not the identity, so bugs show)."""
    gamma = b.weight(f"{name}.weight", b.normal((hidden,), std=0.1, mean=1.0))
    beta = b.weight(f"{name}.bias", b.normal((hidden,), std=0.05))
    return b.layer_norm(x, gamma, beta, eps, name, output)


def _gelu(b: GraphBuilder, x: str, name: str) -> str:
    """0.5 * x * (1 + erf(x / sqrt(2)))."""
    erf = b.node("Erf", [b.node("Div", [x, b.const(math.sqrt(2.0))], name=f"{name}.div")],
                 name=f"{name}.erf")
    one_plus = b.node("Add", [erf, b.const(1.0)], name=f"{name}.add")
    return b.node("Mul", [b.node("Mul", [x, one_plus], name=f"{name}.mul"), b.const(0.5)],
                  name=f"{name}.half")


def _attention(b: GraphBuilder, x: str, mask: str, hidden: int, heads: int, name: str
               ) -> str:
    """Multi-head self-attention: [batch, seq, hidden] -> [batch, seq, hidden]."""
    d = hidden // heads
    # 0 copies the input's dim (as exporters write it): a batch made symbolic still fits
    split = b.const([0, 0, heads, d], np.int64)

    def project(part: str, perm: list[int], std: float) -> str:
        y = _linear(b, x, hidden, hidden, f"{name}.self.{part}", std)
        y = b.node("Reshape", [y, split], name=f"{name}.self.{part}.reshape")
        return b.node("Transpose", [y], name=f"{name}.self.{part}.transpose", perm=perm)

    # Larger query/key weights than BERT's 0.02 give attention scores of std ~1.5, so the
    # softmax is peaked like a trained model's rather than flat.
    qk_std = 1.2 / math.sqrt(hidden)
    q = project("query", [0, 2, 1, 3], qk_std)  # [b, h, s, d]
    k = project("key", [0, 2, 3, 1], qk_std)    # [b, h, d, s]
    v = project("value", [0, 2, 1, 3], _STD)    # [b, h, s, d]
    scores = b.node("MatMul", [q, k], name=f"{name}.self.scores")
    scores = b.node("Div", [scores, b.const(math.sqrt(d))], name=f"{name}.self.scale")
    scores = b.node("Add", [scores, mask], name=f"{name}.self.mask")
    probs = b.node("Softmax", [scores], name=f"{name}.self.softmax", axis=-1)
    ctx = b.node("MatMul", [probs, v], name=f"{name}.self.context")
    ctx = b.node("Transpose", [ctx], name=f"{name}.self.context.transpose", perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, b.const([0, 0, hidden], np.int64)],
                 name=f"{name}.self.context.reshape")
    return _linear(b, ctx, hidden, hidden, f"{name}.output.dense")


def bert(*, layers: int = 12, hidden: int = 768, heads: int = 12, intermediate: int = 3072,
         seq_len: int = 128, vocab: int = 30522, max_position: int = 512, type_vocab: int = 2,
         batch: int = 1, token_type_ids: bool = False, pooler: bool = False,
         opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """BERT encoder (bert-base by default).

    Inputs 'input_ids' and 'attention_mask' int64 [batch, seq_len] (and 'token_type_ids'
    if asked); output 'last_hidden_state' [batch, seq_len, hidden] (and 'pooler_output'
    [batch, hidden] with pooler=True). Before opset 17 LayerNorm is decomposed.
    """
    check_config("bert", layers=layers, hidden=hidden, heads=heads, intermediate=intermediate,
                 seq_len=seq_len, vocab=vocab, max_position=max_position,
                 type_vocab=type_vocab, batch=batch)
    if hidden % heads:
        raise ZooError(f"model 'bert': hidden ({hidden}) must be a multiple of heads ({heads})")
    if seq_len > max_position:
        raise ZooError(f"model 'bert': seq_len ({seq_len}) exceeds max_position "
                       f"({max_position})")
    eps = 1e-12
    b = GraphBuilder("bert", opset, seed)
    ids = b.input("input_ids", np.int64, [batch, seq_len])
    mask = b.input("attention_mask", np.int64, [batch, seq_len])
    types = b.input("token_type_ids", np.int64, [batch, seq_len]) if token_type_ids \
        else b.const(np.zeros((1, seq_len)), np.int64)

    def embedding(part: str, rows: int, indices: str) -> str:
        table = b.weight(f"embeddings.{part}.weight", b.normal((rows, hidden), std=_STD))
        return b.node("Gather", [table, indices], name=f"embeddings.{part}", axis=0)

    positions = b.const(np.arange(seq_len)[None, :], np.int64)
    x = b.node("Add", [embedding("word_embeddings", vocab, ids),
                       embedding("position_embeddings", max_position, positions)],
               name="embeddings.add_position")
    x = b.node("Add", [x, embedding("token_type_embeddings", type_vocab, types)],
               name="embeddings.add_token_type")
    x = _layer_norm(b, x, hidden, "embeddings.LayerNorm", eps)

    # (1 - mask) * -10000, broadcast over heads and query positions: [batch, 1, 1, seq]
    m = b.node("Cast", [b.unsqueeze(mask, [1, 2], name="mask.unsqueeze")], name="mask.cast",
               to=onnx.TensorProto.FLOAT)
    m = b.node("Sub", [b.const(1.0), m], name="mask.invert")
    m = b.node("Mul", [m, b.const(-10000.0)], name="mask.bias")

    for i in range(layers):
        p = f"encoder.layer.{i}"
        y = _attention(b, x, m, hidden, heads, f"{p}.attention")
        y = b.node("Add", [y, x], name=f"{p}.attention.residual")
        x = _layer_norm(b, y, hidden, f"{p}.attention.output.LayerNorm", eps)
        y = _gelu(b, _linear(b, x, hidden, intermediate, f"{p}.intermediate.dense"),
                  f"{p}.intermediate.gelu")
        y = _linear(b, y, intermediate, hidden, f"{p}.output.dense")
        y = b.node("Add", [y, x], name=f"{p}.output.residual")
        last = "last_hidden_state" if i == layers - 1 else None
        x = _layer_norm(b, y, hidden, f"{p}.output.LayerNorm", eps, last)
    b.output(x, np.float32, [batch, seq_len, hidden])

    if pooler:
        first = b.node("Gather", [x, b.const(0, np.int64)], name="pooler.first_token", axis=1)
        pooled = _linear(b, first, hidden, hidden, "pooler.dense")
        b.output(b.node("Tanh", [pooled], name="pooler.tanh", output="pooler_output"),
                 np.float32, [batch, hidden])
    doc = (f"bert: {layers} layers, hidden {hidden}, {heads} heads, intermediate "
           f"{intermediate}, seq {seq_len}, vocab {vocab}; random weights (seed {seed})")
    return b.build(doc, {"vocab_size": str(vocab), "type_vocab_size": str(type_vocab)})
