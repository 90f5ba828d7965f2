"""Hugging Face transformers models (small random-init configs, offline) through from_torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")   # only torch's or transformers' absence skips
transformers = pytest.importorskip("transformers")

import ember  # noqa: E402
from ember.frontend.torch import from_torch  # noqa: E402


def _ids(shape, vocab, seed):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def _check(model, inputs):
    torch.manual_seed(0)
    model = model.eval()
    compiled = ember.compile(from_torch(model, inputs))
    with torch.no_grad():
        expected = model(*inputs).last_hidden_state.numpy()
    got = compiled.run([t.numpy() for t in inputs])[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_bert_with_padding_mask():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=32)
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 5:] = 0
    _check(transformers.BertModel(config), (_ids((2, 8), 64, 1), mask))


def test_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=4,
                                     n_positions=32, use_cache=False, bos_token_id=0,
                                     eos_token_id=0)
    _check(transformers.GPT2Model(config), (_ids((2, 8), 64, 2),))


def test_vit():
    torch.manual_seed(0)
    config = transformers.ViTConfig(image_size=16, patch_size=4, hidden_size=32,
                                    num_hidden_layers=1, num_attention_heads=4,
                                    intermediate_size=64)
    image = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    _check(transformers.ViTModel(config), (image,))
