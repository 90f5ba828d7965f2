"""The real-model corpus: small architectures exported by torch.onnx.export and transformers.

Each builder makes a model from a random-init config with fixed seeds (2 layers, hidden
32-64) and exports it with dynamic axes, as users export theirs, so nothing big is
committed. A CorpusModel carries the ONNX model and inputs at two different sizes; the test
compiles the model once and checks both sizes against onnxruntime.

    corpus = CORPUS["bert"]()
    compiled = ember.compile(corpus.model)         # a SpecializedModel
    compiled.run(corpus.feeds[0]); compiled.run(corpus.feeds[1])
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import torch
from onnx import helper as oh
from onnx import numpy_helper
from torch import nn

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class CorpusModel:
    """An exported model, its inputs at two sizes, and the tolerance of the comparison."""

    model: onnx.ModelProto
    feeds: tuple[Feeds, Feeds]
    rtol: float = 1e-4
    atol: float = 1e-4


def export(module: nn.Module, args: tuple[torch.Tensor, ...], inputs: Sequence[str],
           outputs: Sequence[str], dynamic: Mapping[str, Mapping[int, str]],
           opset: int = 17) -> onnx.ModelProto:
    """torch.onnx.export (the TorchScript exporter, what most published models came
    from) of `module` in eval mode, with the dynamic axes named."""
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, buffer, dynamo=False, input_names=list(inputs),
                          output_names=list(outputs), dynamic_axes=dict(dynamic),
                          opset_version=opset)
    return onnx.load_from_string(buffer.getvalue())


def _ids(shape: tuple[int, ...], vocab: int, seed: int, low: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(low, vocab, shape).astype(np.int64)


def _mask(batch: int, seq: int) -> np.ndarray:
    """Ones, with the last sequence padded (its last positions zero)."""
    mask = np.ones((batch, seq), np.int64)
    mask[-1, seq - max(1, seq // 3):] = 0
    return mask


def _floats(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- transformers encoders ----------------------------------------------------------------

class _HiddenStates(nn.Module):
    """A transformers model called with keyword inputs, returning last_hidden_state."""

    def __init__(self, model: nn.Module, names: Sequence[str]) -> None:
        super().__init__()
        self.model, self.names = model, list(names)

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.names, args))).last_hidden_state


def _text_encoder(model: nn.Module, vocab: int, with_mask: bool = True, low: int = 0,
                  sizes: Sequence[tuple[int, int]] = ((2, 8), (3, 5))) -> CorpusModel:
    names = ["input_ids", "attention_mask"] if with_mask else ["input_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    feeds = []
    for i, (batch, seq) in enumerate(sizes):
        feed = {"input_ids": _ids((batch, seq), vocab, i, low)}
        if with_mask:
            feed["attention_mask"] = _mask(batch, seq)
        feeds.append(feed)
    example = tuple(torch.from_numpy(a) for a in feeds[0].values())
    proto = export(_HiddenStates(model, names), example, names, ["last_hidden_state"],
                   {**axes, "last_hidden_state": {0: "batch", 1: "sequence"}})
    return CorpusModel(proto, (feeds[0], feeds[1]))


def bert() -> CorpusModel:
    """BERT with a padding mask (the extended-mask pattern Cast, Where over the scores)."""
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=32)
    return _text_encoder(transformers.BertModel(config), 64)


def distilbert() -> CorpusModel:
    import transformers

    torch.manual_seed(1)
    config = transformers.DistilBertConfig(vocab_size=64, dim=32, n_layers=2, n_heads=4,
                                           hidden_dim=64, max_position_embeddings=32)
    return _text_encoder(transformers.DistilBertModel(config), 64)


def albert() -> CorpusModel:
    """ALBERT: factorized embeddings (16 -> 32) and one layer shared by both passes."""
    import transformers

    torch.manual_seed(2)
    config = transformers.AlbertConfig(vocab_size=64, embedding_size=16, hidden_size=32,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=32)
    return _text_encoder(transformers.AlbertModel(config), 64)


def roberta() -> CorpusModel:
    """RoBERTa: position ids from a CumSum over the non-padding tokens."""
    import transformers

    torch.manual_seed(3)
    config = transformers.RobertaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=64,
                                        max_position_embeddings=40, pad_token_id=1)
    return _text_encoder(transformers.RobertaModel(config), 64, low=2)


def t5_encoder() -> CorpusModel:
    """T5's encoder: relative position buckets (Log, Min, Where over a Range grid)."""
    import transformers

    torch.manual_seed(4)
    config = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                   num_heads=4, relative_attention_num_buckets=8,
                                   relative_attention_max_distance=16)
    return _text_encoder(transformers.T5EncoderModel(config), 64)


def llama() -> CorpusModel:
    """Llama: RMSNorm, rotary position embeddings, grouped-query attention (4 query heads
    over 2 key/value heads), SwiGLU, a causal mask merged with the padding mask."""
    import transformers

    torch.manual_seed(16)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64,
                                      pad_token_id=0, bos_token_id=0, eos_token_id=0)
    return _text_encoder(transformers.LlamaModel(config), 64)


def bart() -> CorpusModel:
    """BART, encoder and decoder: the decoder's inputs are the ids shifted right, its
    cross-attention reads the (padded) encoder states."""
    import transformers

    torch.manual_seed(20)
    config = transformers.BartConfig(vocab_size=64, d_model=32, encoder_layers=2,
                                     decoder_layers=2, encoder_attention_heads=4,
                                     decoder_attention_heads=4, encoder_ffn_dim=64,
                                     decoder_ffn_dim=64, max_position_embeddings=32,
                                     pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                     decoder_start_token_id=2)
    return _text_encoder(transformers.BartModel(config), 64, low=3)


class _ViT(nn.Module):
    """ViT called with interpolate_pos_encoding: the position table is resized (bicubic)
    to the patch grid, so the image size is dynamic too."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixels, interpolate_pos_encoding=True).last_hidden_state


def vit() -> CorpusModel:
    """ViT with 4x4 patches at 16x16 and 24x24 (batch 1 and 2)."""
    import transformers

    torch.manual_seed(5)
    config = transformers.ViTConfig(image_size=16, patch_size=4, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=64)
    feeds = tuple({"pixel_values": _floats((batch, 3, size, size), batch)}
                  for batch, size in ((1, 16), (2, 24)))
    proto = export(_ViT(transformers.ViTModel(config)),
                   (torch.from_numpy(feeds[0]["pixel_values"]),), ["pixel_values"],
                   ["last_hidden_state"],
                   {"pixel_values": {0: "batch", 2: "height", 3: "width"},
                    "last_hidden_state": {0: "batch", 1: "tokens"}})
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


def swin() -> CorpusModel:
    """Swin: shifted-window attention (windows cut by Reshape/Transpose, the shift a
    torch.roll), patch merging; batch dynamic."""
    import transformers

    torch.manual_seed(19)
    config = transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2],
                                     num_heads=[2, 4], window_size=4)
    feeds = tuple({"pixel_values": _floats((batch, 3, 32, 32), 110 + batch)}
                  for batch in (1, 2))
    proto = export(_HiddenStates(transformers.SwinModel(config), ["pixel_values"]),
                   (torch.from_numpy(feeds[0]["pixel_values"]),), ["pixel_values"],
                   ["last_hidden_state"], {"pixel_values": {0: "batch"},
                                           "last_hidden_state": {0: "batch"}})
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


def convnext() -> CorpusModel:
    """ConvNeXt: 7x7 depthwise convolutions, channels-last LayerNorm, layer scale."""
    import transformers

    torch.manual_seed(21)
    config = transformers.ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1],
                                         num_stages=2)
    feeds = tuple({"pixel_values": _floats((batch, 3, size, size), 120 + batch)}
                  for batch, size in ((1, 32), (2, 48)))
    proto = export(_HiddenStates(transformers.ConvNextModel(config), ["pixel_values"]),
                   (torch.from_numpy(feeds[0]["pixel_values"]),), ["pixel_values"],
                   ["last_hidden_state"],
                   {"pixel_values": {0: "batch", 2: "height", 3: "width"},
                    "last_hidden_state": {0: "batch", 2: "grid_height", 3: "grid_width"}})
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


def wav2vec2() -> CorpusModel:
    """wav2vec 2.0: a strided 1-d conv feature extractor over raw audio (GroupNorm), a
    grouped positional convolution, then the encoder; batch and sample count dynamic."""
    import transformers

    torch.manual_seed(17)
    config = transformers.Wav2Vec2Config(vocab_size=16, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=64,
                                         conv_dim=(16, 16), conv_stride=(5, 2),
                                         conv_kernel=(10, 3), num_conv_pos_embeddings=8,
                                         num_conv_pos_embedding_groups=4,
                                         feat_extract_norm="group")
    feeds = tuple({"audio": _floats((batch, samples), 100 + batch)}
                  for batch, samples in ((1, 400), (2, 560)))
    proto = export(_HiddenStates(transformers.Wav2Vec2Model(config), ["input_values"]),
                   (torch.from_numpy(feeds[0]["audio"]),), ["audio"], ["last_hidden_state"],
                   {"audio": {0: "batch", 1: "samples"},
                    "last_hidden_state": {0: "batch", 1: "frames"}})
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


def whisper_encoder() -> CorpusModel:
    """Whisper's encoder: two 1-d convolutions (the second strided), GELU, sinusoidal
    positions; its length is fixed by the config, so the batch is what varies."""
    import transformers

    torch.manual_seed(6)
    config = transformers.WhisperConfig(vocab_size=64, num_mel_bins=8, d_model=32,
                                        encoder_layers=2, encoder_attention_heads=4,
                                        decoder_layers=1, decoder_attention_heads=4,
                                        encoder_ffn_dim=64, decoder_ffn_dim=64,
                                        max_source_positions=8, max_target_positions=16,
                                        pad_token_id=0, bos_token_id=0, eos_token_id=0,
                                        decoder_start_token_id=0)
    encoder = transformers.WhisperModel(config).get_encoder()
    feeds = tuple({"input_features": _floats((batch, 8, 16), 10 + batch)} for batch in (1, 3))
    proto = export(_HiddenStates(encoder, ["input_features"]),
                   (torch.from_numpy(feeds[0]["input_features"]),), ["input_features"],
                   ["last_hidden_state"], {"input_features": {0: "batch"},
                                           "last_hidden_state": {0: "batch"}})
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


# ---- GPT-2 with past key/values -------------------------------------------------------

class _GPT2Step(nn.Module):
    """One decoding step: the new tokens and each layer's past keys and values in, the
    hidden states and the present keys and values out."""

    def __init__(self, model: nn.Module, layers: int) -> None:
        super().__init__()
        self.model, self.layers = model, layers

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, *past: torch.Tensor
                ) -> tuple[torch.Tensor, ...]:
        import transformers

        cache = transformers.DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=ids, attention_mask=mask, past_key_values=cache,
                         use_cache=True)
        present = out.past_key_values
        flat = []
        for i in range(self.layers):
            layer = present.layers[i]
            flat += [layer.keys, layer.values]
        return (out.last_hidden_state, *flat)


def gpt2_past() -> CorpusModel:
    """GPT-2 decoding with a key/value cache: batch, new tokens and past length dynamic."""
    import transformers

    torch.manual_seed(7)
    layers, heads, hidden = 2, 4, 32
    config = transformers.GPT2Config(vocab_size=64, n_embd=hidden, n_layer=layers,
                                     n_head=heads, n_positions=32, bos_token_id=0,
                                     eos_token_id=0)
    past_names = [f"past_{i}_{kv}" for i in range(layers) for kv in ("key", "value")]
    present_names = [f"present_{i}_{kv}" for i in range(layers) for kv in ("key", "value")]
    feeds = []
    for case, (batch, new, past) in enumerate(((1, 1, 4), (2, 3, 7))):
        feed = {"input_ids": _ids((batch, new), 64, 20 + case),
                "attention_mask": np.ones((batch, past + new), np.int64)}
        for j, name in enumerate(past_names):
            feed[name] = _floats((batch, heads, past, hidden // heads), 30 + 4 * case + j)
        feeds.append(feed)
    axes: dict[str, dict[int, str]] = {"input_ids": {0: "batch", 1: "new"},
                                        "attention_mask": {0: "batch", 1: "total"},
                                        "last_hidden_state": {0: "batch", 1: "new"}}
    axes.update({n: {0: "batch", 2: "past"} for n in past_names})
    axes.update({n: {0: "batch", 2: "total"} for n in present_names})
    example = tuple(torch.from_numpy(a) for a in feeds[0].values())
    proto = export(_GPT2Step(transformers.GPT2Model(config), layers), example,
                   ["input_ids", "attention_mask", *past_names],
                   ["last_hidden_state", *present_names], axes)
    return CorpusModel(proto, (feeds[0], feeds[1]))


# ---- convolutional networks -------------------------------------------------------------

def _image_model(module: nn.Module, sizes: Sequence[tuple[int, int]], channels: int = 3,
                 outputs: Sequence[str] = ("logits",),
                 output_axes: Mapping[str, Mapping[int, str]] | None = None,
                 seed: int = 40) -> CorpusModel:
    """An image model with dynamic batch, height and width, inputs (batch, size) each."""
    feeds = tuple({"image": _floats((batch, channels, size, size), seed + i)}
                  for i, (batch, size) in enumerate(sizes))
    axes = {"image": {0: "batch", 2: "height", 3: "width"}}
    axes.update(output_axes if output_axes is not None else
                {name: {0: "batch"} for name in outputs})
    proto = export(module, (torch.from_numpy(feeds[0]["image"]),), ["image"], outputs, axes)
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


def _randomize_batch_norms(module: nn.Module, seed: int) -> nn.Module:
    """Running statistics and affine parameters away from 0/1, so folding them shows."""
    generator = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.normal_(0, 0.1, generator=generator)
                m.running_var.uniform_(0.5, 1.5, generator=generator)
                m.weight.uniform_(0.5, 1.5, generator=generator)
                m.bias.normal_(0, 0.1, generator=generator)
    return module


class _Inverted(nn.Module):
    """MobileNetV3's block: expand 1x1, depthwise 3x3, squeeze-excite, project 1x1."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int = 2) -> None:
        super().__init__()
        mid = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid),
                                    nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(mid, mid, 3, stride, 1, groups=mid,
                                                 bias=False), nn.BatchNorm2d(mid),
                                       nn.Hardswish())
        self.excite = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, mid // 2, 1),
                                    nn.ReLU(), nn.Conv2d(mid // 2, mid, 1), nn.Hardsigmoid())
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.depthwise(self.expand(x))
        y = self.project(y * self.excite(y))
        return x + y if self.residual else y


def mobilenet() -> CorpusModel:
    """A MobileNetV3-like net: hard-swish, depthwise convolutions, squeeze-excite."""
    torch.manual_seed(8)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                        nn.Hardswish(), _Inverted(8, 8, 1), _Inverted(8, 16, 2),
                        _Inverted(16, 16, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(16, 10))
    return _image_model(_randomize_batch_norms(net, 8), [(1, 32), (2, 40)])


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                                  nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(cout))
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


def _resnet(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), _BasicBlock(8, 8, 1), _BasicBlock(8, 16, 2),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    return _randomize_batch_norms(net, seed)


class _Calibration:
    """onnxruntime.quantization's CalibrationDataReader protocol over seeded images."""

    def __init__(self, count: int, size: int) -> None:
        self._images = iter([{"image": _floats((1, 3, size, size), 90 + i)}
                             for i in range(count)])

    def get_next(self) -> Feeds | None:
        return next(self._images, None)


def qdq_resnet() -> CorpusModel:
    """An int8 ResNet in QDQ form, as onnxruntime.quantization.quantize_static writes it
    (per-channel weights, calibrated activations) from the float export."""
    import tempfile
    from pathlib import Path

    from onnxruntime import quantization as q

    floating = _image_model(_resnet(9), [(1, 16), (3, 24)])
    with tempfile.TemporaryDirectory() as directory:
        source, target = Path(directory, "float.onnx"), Path(directory, "int8.onnx")
        onnx.save(floating.model, source)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q.quantize_static(str(source), str(target), _Calibration(8, 16),
                              quant_format=q.QuantFormat.QDQ, per_channel=True,
                              activation_type=q.QuantType.QInt8,
                              weight_type=q.QuantType.QInt8)
        model = onnx.load(target)
    # int8 rounding may differ by one step where a float sum lands on a tie
    return CorpusModel(model, floating.feeds, rtol=0.0, atol=0.05)


def paddle_cnn() -> CorpusModel:
    """Paddle-style: the batch declared as the literal -1 and the flatten a Reshape by the
    constant [0, -1] (as paddle2onnx writes them)."""
    net = _resnet(10)
    model = _image_model(net, [(1, 16), (4, 16)]).model
    for vi in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.ClearField("dim_param")
                dim.dim_value = -1
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Flatten":
            shape = f"{node.name}_shape"
            model.graph.initializer.append(numpy_helper.from_array(
                np.array([0, -1], np.int64), shape))
            node = oh.make_node("Reshape", [node.input[0], shape], list(node.output),
                                name=node.name)
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    feeds = tuple({"image": _floats((batch, 3, 16, 16), 50 + batch)} for batch in (1, 4))
    return CorpusModel(model, feeds)  # type: ignore[arg-type]


class _UNet(nn.Module):
    """Two levels: conv, max-pool, conv, transposed-conv up, skip concat, nearest resize."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.bottom = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.head = nn.Conv2d(16, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.down(x)
        y = torch.cat([self.up(self.bottom(skip)), skip], dim=1)
        y = self.head(y)
        return nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")


def unet() -> CorpusModel:
    torch.manual_seed(11)
    axes = {"mask": {0: "batch", 2: "height", 3: "width"}}
    return _image_model(_randomize_batch_norms(_UNet(), 11), [(1, 16), (2, 24)],
                        outputs=["mask"], output_axes=axes)


class _Attention(nn.Module):
    """Pre-norm multi-head self-attention and MLP over tokens [batch, tokens, dim]."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, dim = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)                    # [b, heads, n, d] each
        probs = (q @ k.transpose(-2, -1) * (dim // self.heads) ** -0.5).softmax(dim=-1)
        x = x + self.proj((probs @ v).transpose(1, 2).reshape(b, n, dim))
        return x + self.mlp(self.norm2(x))


class _ConvTransformer(nn.Module):
    """A conv stem making patches, then transformer blocks over them (CvT/MobileViT-like):
    the token count follows the image size."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.GELU(),
                                  nn.Conv2d(16, 32, 2, 2))
        self.blocks = nn.Sequential(_Attention(), _Attention())
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.blocks(tokens).mean(dim=1))


def conv_transformer() -> CorpusModel:
    torch.manual_seed(12)
    return _image_model(_randomize_batch_norms(_ConvTransformer(), 12), [(1, 16), (2, 24)])


# ---- a YOLO-style detector with NMS ---------------------------------------------------

class _NMS(torch.autograd.Function):
    """NonMaxSuppression in the export (as YOLO's end-to-end exports add it); in torch a
    stand-in with the output's type, since only the exported graph is run."""

    @staticmethod
    def forward(ctx: object, boxes: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return torch.zeros((0, 3), dtype=torch.int64)

    @staticmethod
    def symbolic(g: object, boxes: object, scores: object) -> object:
        limit = g.op("Constant", value_t=torch.tensor([5], dtype=torch.int64))  # type: ignore
        iou = g.op("Constant", value_t=torch.tensor([0.5]))  # type: ignore[attr-defined]
        floor = g.op("Constant", value_t=torch.tensor([0.25]))  # type: ignore[attr-defined]
        return g.op("NonMaxSuppression", boxes, scores, limit, iou, floor,  # type: ignore
                    center_point_box_i=1)


class _Detector(nn.Module):
    """A YOLO-style single-scale detector: a conv backbone, a head predicting per cell
    (cx, cy, w, h, objectness, classes), the grid decode, then NMS over the boxes."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.SiLU(),
                                      nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.SiLU())
        self.head = nn.Conv2d(16, 5 + classes, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        p = self.head(self.backbone(x))                       # [b, 5 + c, h, w]
        b, _, h, w = p.shape
        p = p.flatten(2).transpose(1, 2).sigmoid()            # [b, h*w, 5 + c]
        ys = torch.arange(h, dtype=torch.float32)
        xs = torch.arange(w, dtype=torch.float32)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        grid = torch.stack([grid_x, grid_y], dim=-1).reshape(1, h * w, 2)
        centers = (p[..., :2] * 2 - 0.5 + grid) * 4.0
        sizes = (p[..., 2:4] * 2) ** 2 * 4.0
        boxes = torch.cat([centers, sizes], dim=-1)           # [b, h*w, 4], center form
        scores = (p[..., 5:] * p[..., 4:5]).transpose(1, 2)   # [b, classes, h*w]
        selected = _NMS.apply(boxes, scores)                  # [k, 3]
        kept = boxes[selected[:, 0], selected[:, 2]]          # [k, 4]
        return boxes, selected, kept


def yolo_nms() -> CorpusModel:
    torch.manual_seed(13)
    axes = {"boxes": {0: "batch", 1: "cells"}, "selected": {0: "kept"},
            "kept_boxes": {0: "kept"}}
    return _image_model(_randomize_batch_norms(_Detector(), 13), [(1, 32), (2, 48)],
                        outputs=["boxes", "selected", "kept_boxes"], output_axes=axes)


# ---- recurrent networks ---------------------------------------------------------------

class _RNNT(nn.Module):
    """An RNN-T: an LSTM encoder over audio features (its zero initial state built in the
    graph, as `torch.zeros(layers, batch, hidden)` exports), an embedding + LSTM prediction
    network, and the joint network over every (frame, label) pair."""

    def __init__(self, features: int = 8, hidden: int = 32, vocab: int = 16) -> None:
        super().__init__()
        self.hidden = hidden
        self.encoder = nn.LSTM(features, hidden, num_layers=2)
        self.embed = nn.Embedding(vocab, hidden)
        self.predictor = nn.LSTM(hidden, hidden)
        self.joint = nn.Sequential(nn.Tanh(), nn.Linear(hidden, vocab))

    def forward(self, audio: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        zeros = torch.zeros(2, audio.size(1), self.hidden)
        encoded, _ = self.encoder(audio, (zeros, zeros))             # [t, b, h]
        predicted, _ = self.predictor(self.embed(labels).transpose(0, 1))  # [u, b, h]
        pair = encoded.transpose(0, 1)[:, :, None] + predicted.transpose(0, 1)[:, None]
        return self.joint(pair).log_softmax(dim=-1)                   # [b, t, u, vocab]


def rnnt() -> CorpusModel:
    torch.manual_seed(14)
    feeds = tuple({"audio": _floats((frames, batch, 8), 60 + batch),
                   "labels": _ids((batch, tokens), 16, 70 + batch)}
                  for frames, batch, tokens in ((6, 1, 3), (9, 2, 4)))
    axes = {"audio": {0: "frames", 1: "batch"}, "labels": {0: "batch", 1: "tokens"},
            "logits": {0: "batch", 1: "frames", 2: "tokens"}}
    example = tuple(torch.from_numpy(a) for a in feeds[0].values())
    proto = export(_RNNT(), example, ["audio", "labels"], ["logits"], axes)
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


class _GRUTagger(nn.Module):
    """A sequence tagger: embedding, a bidirectional GRU (implicit zero state), linear."""

    def __init__(self, vocab: int = 32, hidden: int = 32, tags: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.gru(self.embed(tokens))
        return self.out(states)


def gru_tagger() -> CorpusModel:
    torch.manual_seed(15)
    feeds = tuple({"tokens": _ids((batch, seq), 32, 80 + batch)} for batch, seq in
                  ((1, 5), (3, 8)))
    proto = export(_GRUTagger(), (torch.from_numpy(feeds[0]["tokens"]),), ["tokens"], ["tags"],
                   {"tokens": {0: "batch", 1: "sequence"},
                    "tags": {0: "batch", 1: "sequence"}})
    return CorpusModel(proto, feeds)  # type: ignore[arg-type]


CORPUS: dict[str, Callable[[], CorpusModel]] = {
    "bert": bert, "distilbert": distilbert, "albert": albert, "roberta": roberta,
    "t5_encoder": t5_encoder, "llama": llama, "bart": bart, "gpt2_past": gpt2_past,
    "vit": vit, "swin": swin, "convnext": convnext, "whisper_encoder": whisper_encoder,
    "wav2vec2": wav2vec2, "mobilenet": mobilenet, "qdq_resnet": qdq_resnet,
    "paddle_cnn": paddle_cnn, "unet": unet, "conv_transformer": conv_transformer,
    "yolo_nms": yolo_nms, "rnnt": rnnt, "gru_tagger": gru_tagger,
}
