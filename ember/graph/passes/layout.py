"""Move convolutions to the blocked layout NCHW[x]c, with their weights packed at compile time.

A blocked tensor [N, C/x, H, W, x] keeps x channels (x = the target's float32 vector lanes)
contiguous. The pass walks the graph in order and converts:
- Conv with constant weights, 2-D, group 1 or depthwise -> ConvNCHWc (weights packed now);
- elementwise / broadcast ops whose tensor inputs are blocked or can be (per-channel and
  scalar constants are re-laid out) -> the same op on the blocked tensors;
- MaxPool / AveragePool -> the same pool over [H, W, x] with a 1-wide window on x;
- Concat on channels when every input has the output's block.
A convolution whose output channels take a narrow block (1000 = 125 blocks of 8 on a 16-lane
CPU, half a vector per FMA) gets full-width blocks instead, its channels padded with zero
weights (1008 = 63 x 16), where no convolution or concat reads the padded tensor through the
channel-local ops after it: the padded lanes then never mix into a real channel, and the
LayoutTransform back to NCHW drops them (its `channels` attribute).
Every other op reads NCHW. A LayoutTransform is inserted only where a value crosses between
the two worlds, at most once per value and direction; a value converted back to NCHW keeps
its Value (so graph outputs and NCHW readers are unchanged), and a transform of a transform
is never made: a value whose blocked twin exists is read through that twin.

    fast = convert_layout(graph)                  # block = this CPU's float32 lanes
    fast = convert_layout(graph, LayoutRule(block=8, winograd=False))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ember.graph.ir import Graph, Node, TensorType, Value, rebuild
from ember.graph.passes.rewrite import make_constant
from ember.ops.registry import Pattern, get_op
from ember.target_facts import TargetFacts

POOLS = ("MaxPool", "AveragePool")


@dataclass(frozen=True)
class LayoutRule:
    """What the pass converts and how (the knobs of the layout decision).

    block: channels per block (0: the host's float32 vector lanes); min_channels: convs with
    fewer output channels stay NCHW; winograd: use Winograd for the 3x3 stride-1
    convolutions `use_winograd` picks (else the direct kernel), on outputs at least
    winograd_min_width wide and with at least winograd_min_channels input and output channels
    (`winograd_min_width` and `winograd_min_channels` of the target), as F(4,3) where the
    output has at least winograd_f4_min_tiles 4x4 tiles (0: always F(2,3); `winograd_tile`),
    twice as many where F(4,3)'s weights exceed winograd_f4_weight_bytes (a core's L2; 0: no
    limit), else F(2,3); depthwise / pools / elementwise / concat: convert those kinds of nodes;
    pad_channels: pad a convolution's narrow output block to the full vector (see the
    module's docstring) where the padding costs less than the narrow block (padded /
    channels < lanes / block), and, with `tile_facts` (the target's, for a CPU), a direct
    convolution's full-width blocks by up to 1/32 more where the register tile
    (conv_blocked.direct_tile_score) gains more than the padding costs.
    """

    block: int = 0
    min_channels: int = 4
    winograd: bool = True
    winograd_min_width: int = 0
    winograd_min_channels: int = 0
    winograd_f4_min_tiles: int = 0
    winograd_f4_weight_bytes: int = 0
    depthwise: bool = True
    pools: bool = True
    elementwise: bool = True
    concat: bool = True
    pad_channels: bool = True
    tile_facts: TargetFacts | None = None


# input and output channels from which a 3x3 stride-1 convolution runs as Winograd where
# winograd_min_channels does not lower it
WINOGRAD_MIN_CHANNELS = 128
# output tiles from which a Winograd convolution on a CPU takes F(4,3) (see winograd_tile)
WINOGRAD_F4_MIN_TILES = 16


def host_lanes() -> int:
    from ember.target import Target

    try:
        return max(4, Target("llvm").vector_lanes("float32"))
    except Exception:  # noqa: BLE001 (no LLVM: the common 16-lane default)
        return 16


def block_of(channels: int, lanes: int) -> int:
    """The channel block for `channels`: the widest of lanes, lanes/2, lanes/4 (>= 4) that
    divides it; all of them when fewer than lanes (e.g. 3 for an RGB input); else 0 (stays
    NCHW)."""
    for b in (lanes, lanes // 2, lanes // 4):
        if b >= 4 and channels % b == 0:
            return b
    return channels if 0 < channels < lanes else 0


def use_winograd(x: TensorType, w: TensorType, attrs: dict[str, object],
                 min_width: int = 0, min_channels: int = 0) -> bool:
    """Where Winograd F(2,3) replaces the direct kernel (when LayoutRule.winograd is on, the
    default): 3x3, stride 1, no dilation, one group, at least `min_channels` (default
    WINOGRAD_MIN_CHANNELS) input and output channels, an input at least `min_width` wide.
    Measured on Zen 4 (conv + ReLU, 1 thread, kernel time, Winograd / direct): 64@56 1.79
    (the transforms cost more than the 2.25x fewer multiplies save at 64 channels), 128@28
    0.52, 256@14 0.48, 512@7 0.86; resnet50 0.91, resnet18 0.82."""
    strides = tuple(attrs.get("strides") or (1, 1))  # type: ignore[arg-type]
    dilations = tuple(attrs.get("dilations") or (1, 1))  # type: ignore[arg-type]
    return (w.shape[2:] == (3, 3) and strides == (1, 1) and dilations == (1, 1)
            and int(attrs.get("group", 1) or 1) == 1  # type: ignore[arg-type]
            and min(x.shape[1], w.shape[0]) >= (min_channels or WINOGRAD_MIN_CHANNELS)
            and x.shape[-1] >= min_width)


def winograd_tile(out_hw: tuple[int, int], f4_min_tiles: int, weight_bytes: int = 0,
                  cache_bytes: int = 0, batch: int = 1) -> int:
    """The output tile of a Winograd convolution with output [batch, OH, OW]: F(4,3) (4x4
    tiles, 4x fewer multiplies than direct, 36 transformed values a tile) where it has at
    least `f4_min_tiles` tiles (0: never), else F(2,3) (2.25x fewer, 16 values). Each
    transformed weight is used once per tile and F(4,3)'s weights (`weight_bytes` of them)
    are 4x the direct kernel's, so few tiles make it weight-bound: 512@7 (4 tiles) F(4,3)
    3.3 ms, F(2,3) 1.2 ms; 64@56 0.71 ms against 1.16 (direct 1.33; 1 thread, Sapphire
    Rapids class). Weights that overflow `cache_bytes` (a core's L2; 0: no limit) stream
    from L3 or memory on every run, inside a network where the other layers evict them:
    there F(4,3) needs twice `f4_min_tiles` (each weight byte then feeds 16 FLOPs or more).
    256@14 (16 tiles, 9.4 MB of F(4,3) weights, 2 MB L2) in ResNet-50: F(4,3) 1.87 ms,
    F(2,3) 1.42, direct 1.55; alone, with its weights in L3, F(4,3) 0.66 and F(2,3) 0.81."""
    oh, ow = out_hw
    tiles = batch * -(-oh // 4) * -(-ow // 4)
    if cache_bytes and weight_bytes > cache_bytes:
        f4_min_tiles *= 2
    return 4 if f4_min_tiles and tiles >= f4_min_tiles else 2


def winograd_min_width(facts: TargetFacts) -> int:
    """The narrowest input Winograd pays on, for a target: on a core that starts 32 float32
    FMAs a cycle (two 512-bit pipes, Sapphire Rapids) the direct kernel's multiplies cost
    half what they do on Zen 4 while Winograd's transforms and its 16/9 larger weights
    stream at the same speed, so at 7x7 (16 tiles of 2x2, each transformed weight used 16
    times) direct wins: 512@7 Winograd 2.9 ms, direct 2.2 ms (1 thread; 256@14 Winograd
    1.3 ms, direct 1.6 ms). Elsewhere every width qualifies."""
    return 8 if facts.fma_lanes_per_cycle >= 32 else 0


def winograd_min_channels(facts: TargetFacts) -> int:
    """The fewest channels Winograd pays on, for a target. From 64 channels wherever a core
    starts two full-width FMAs a cycle (Sapphire Rapids, AVX2 cores) or only 8 float32 FMAs
    a cycle or fewer (WebAssembly SIMD, NEON, SSE): there the direct kernel cannot keep the
    pipes full (load slots, latency) while F(4,3) does a quarter of its multiplies (64@56, 1
    thread, Sapphire Rapids class: direct 1.33 ms, F(2,3) 1.16, F(4,3) 0.71; ResNet-18 in
    Chromium there: 77 ms with the 64-channel layers direct, 67 ms Winograd). A core whose
    one full-width FMA takes all its pipes (Zen 4: a 512-bit FMA on both 256-bit pipes) runs
    the direct kernel near peak and keeps WINOGRAD_MIN_CHANNELS (64@56 on Zen 4: F(2,3) 1.79x
    the direct kernel's time; F(4,3) not measured there)."""
    if facts.vector_fmas_per_cycle < 2 and facts.fma_lanes_per_cycle > 8:
        return WINOGRAD_MIN_CHANNELS
    return 64


class _Converter:
    """The walk: blocked twins of values, NCHW values made on demand, new nodes in order."""

    def __init__(self, graph: Graph, rule: LayoutRule) -> None:
        self.graph = graph
        self.rule = rule
        self.lanes = rule.block or host_lanes()
        self.nodes: list[Node] = []
        self.blocked: dict[Value, Value] = {}      # NCHW value -> its blocked twin
        self.virtual: set[Value] = set()           # NCHW values not materialized yet
        self.padded: dict[Value, int] = {}         # NCHW value -> blocks of its padded twin
        self._paddable: dict[Value, bool] = {}     # memo of paddable()
        self.count = 0

    # -- values ---------------------------------------------------------------------------
    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_nchwc{self.count}"

    def block(self, v: Value) -> int:
        if v.type.ndim != 4 or not v.type.dtype.is_float:
            return 0
        if v in self.padded:
            return self.lanes
        return block_of(v.type.shape[1], self.lanes)

    def to_blocked(self, v: Value) -> Value:
        """The blocked twin of the NCHW value v (a LayoutTransform the first time)."""
        if v in self.blocked:
            return self.blocked[v]
        b = self.block(v)
        assert b and v not in self.padded, v  # a padded value is made blocked, never re-blocked
        n, c, h, w = v.type.shape
        out = Value(self.name(v.name), TensorType((n, c // b, h, w, b), v.type.dtype))
        self.nodes.append(Node("LayoutTransform", self.name("to_nchwc"), (v,), (out,),
                               {"src_block": 0, "dst_block": b}))
        self.blocked[v] = out
        return out

    def to_plain(self, v: Value | None) -> Value | None:
        """v itself, made by a LayoutTransform from its twin if it was only blocked so far."""
        if v is not None and v in self.virtual:
            twin = self.blocked[v]
            attrs = {"src_block": twin.type.shape[4], "dst_block": 0}
            if v in self.padded:  # drop the padding channels
                attrs["channels"] = v.type.shape[1]
            self.nodes.append(Node("LayoutTransform", self.name("to_nchw"), (twin,), (v,),
                                   attrs))
            self.virtual.discard(v)
        return v

    def define_blocked(self, v: Value, twin: Value) -> None:
        self.blocked[v] = twin
        self.virtual.add(v)

    def blocked_output(self, v: Value, b: int) -> Value:
        n, c, h, w = v.type.shape
        blocks = self.padded.get(v, -(-c // b))
        out = Value(self.name(v.name), TensorType((n, blocks, h, w, b), v.type.dtype))
        self.define_blocked(v, out)
        return out

    def paddable(self, v: Value) -> bool:
        """Whether v's blocked twin may carry padding channels: no convolution or concat
        (the ops that mix or move channels) reads it through elementwise ops and pools."""
        if v not in self._paddable:
            self._paddable[v] = all(
                reader.op not in ("Conv", "Concat", "LayoutTransform")
                and (not (reader.op in POOLS or _is_elementwise(reader.op))
                     or all(self.paddable(o) for o in reader.outputs))
                for reader in self._readers.get(v, ()))
        return self._paddable[v]

    def padded_block(self, channels: int, block: int) -> int:
        """The full vector for a narrow block where padding `channels` up to it costs less
        than the narrow block does (0: keep the narrow block)."""
        lanes = self.lanes
        if not self.rule.pad_channels or not 0 < block < lanes or channels < lanes:
            return 0
        return lanes if -(-channels // lanes) * lanes * block < channels * lanes else 0

    def tile_padding(self, out: TensorType, ob: int, weights: np.ndarray) -> int:
        """Output channels to add to a direct convolution with full-width blocks of `ob`:
        up to 1/32 more blocks where the register tile's score, discounted by the padded
        work, beats the unpadded one by 2% (squeezenet's 512->1000 at 13x13 on AVX2: 125
        blocks of 8 allow only 2 x 5 tiles; 128 take 3 x 4, 2.66 -> 2.26 ms, 1 thread,
        Zen 3); 0: none."""
        facts = self.rule.tile_facts
        n, channels, oh, ow = out.shape
        if facts is None or not self.rule.pad_channels or ob != self.lanes or \
                channels % ob or not isinstance(ow, int):
            return 0
        from ember.ops.conv_blocked import direct_tile_score

        ocb = channels // ob
        block_bytes = int(np.prod(weights.shape[1:])) * weights.itemsize * ob

        def score(blocks: int) -> float:
            return direct_tile_score((n, blocks, oh, ow, ob), self.lanes, facts,
                                     block_bytes) * ocb / blocks

        best = max(range(ocb, ocb + ocb // 32 + 1), key=lambda b: (score(b), -b))
        return (best - ocb) * ob if score(best) > 1.02 * score(ocb) else 0

    # -- nodes ----------------------------------------------------------------------------
    def keep(self, node: Node) -> None:
        for v in node.inputs:
            self.to_plain(v)
        self.nodes.append(node)

    def visit(self, node: Node) -> None:
        rule = self.rule
        converted = False
        if node.op == "Conv":
            converted = self.conv(node)
        elif node.op == "LayoutTransform":
            converted = self.existing_transform(node)
        elif node.op in POOLS and rule.pools:
            converted = self.pool(node)
        elif node.op == "Concat" and rule.concat:
            converted = self.concat(node)
        elif rule.elementwise and _is_elementwise(node.op):
            converted = self.elementwise(node)
        if not converted:
            self.keep(node)

    def conv(self, node: Node) -> bool:
        x, w = node.inputs[0], node.inputs[1]
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        if x is None or w is None or w.data is None or x.type.ndim != 4:
            return False
        if bias is not None and bias.data is None:
            return False
        out = node.outputs[0]
        group = int(node.attrs.get("group", 1))
        ib, ob = self.block(x), self.block(out)
        channels = x.type.shape[1]
        depthwise = group > 1 and group == channels == out.type.shape[1] and ib == ob
        if not ib or not ob or (group != 1 and not depthwise) or \
                (depthwise and not self.rule.depthwise) or \
                out.type.shape[1] < self.rule.min_channels:
            return False
        from ember.ops.conv_blocked import pack_depthwise, pack_direct
        from ember.ops.conv_common import conv_geometry

        kernel, strides, dilations, pads, _ = conv_geometry(node.attrs, x.type, w.type)
        attrs: dict[str, object] = {
            "kernel_shape": tuple(kernel), "strides": tuple(strides),
            "dilations": tuple(dilations),
            "pads": (pads[0][0], pads[1][0], pads[0][1], pads[1][1])}
        winograd = not depthwise and self.rule.winograd and use_winograd(
            x.type, w.type, attrs, self.rule.winograd_min_width, self.rule.winograd_min_channels)

        weights = w.data
        full = 0 if depthwise else self.padded_block(out.type.shape[1], ob)
        pad = 0
        if full and self.paddable(out):
            ob, pad = full, -out.type.shape[1] % full
        elif not depthwise and not winograd and self.paddable(out):
            pad = self.tile_padding(out.type, ob, weights)
        if pad:
            weights = np.pad(weights, [(0, pad)] + [(0, 0)] * (weights.ndim - 1))
            if bias is not None:
                bias = make_constant(f"{bias.name}_pad{pad}", np.pad(bias.data, (0, pad)))
            self.padded[out] = (out.type.shape[1] + pad) // ob
        if depthwise:
            algorithm, packed = "depthwise", pack_depthwise(weights, ob)
            packing = algorithm
        elif winograd:
            from ember.ops.conv_winograd import pack_winograd

            n, _, oh, ow = out.type.shape
            batch = n if isinstance(n, int) else 1  # a symbolic batch: at least one image
            f4_bytes = 36 * weights.shape[0] * weights.shape[1] * weights.itemsize
            tile = winograd_tile((oh, ow), self.rule.winograd_f4_min_tiles, f4_bytes,
                                 self.rule.winograd_f4_weight_bytes, batch)
            algorithm, packed = "winograd", pack_winograd(weights, ib, ob, tile)
            packing = f"winograd{tile}"
        else:
            algorithm, packed = "direct", pack_direct(weights, ib, ob)
            packing = algorithm
        attrs["algorithm"] = algorithm
        wv = make_constant(f"{w.name}_{packing}{ib}x{ob}", packed)
        # an NCHW input that is one block (an RGB image) is read as it is, no transform
        xin = x if ib == channels and x not in self.blocked and algorithm == "direct" \
            else self.to_blocked(x)
        inputs = (xin, wv, bias) if bias is not None else (xin, wv)
        y = self.blocked_output(out, ob)
        self.nodes.append(Node("ConvNCHWc", node.name, inputs, (y,), attrs))
        return True

    def existing_transform(self, node: Node) -> bool:
        """Record what an earlier run of this pass made, so transforms never stack."""
        (x,), (y,) = node.inputs, node.outputs
        src, dst = int(node.attrs["src_block"]), int(node.attrs["dst_block"])
        if x is None or (src and dst) or node.attrs.get("channels"):
            return False
        if dst:  # NCHW -> blocked: y is x's twin
            if x in self.blocked:
                return False
            self.blocked[x] = y
            self.nodes.append(node)
            return True
        if x.type.shape[4] != self.block(y):
            return False
        self.define_blocked(y, x)  # blocked -> NCHW: made only if something reads it
        return True

    def elementwise(self, node: Node) -> bool:
        out = node.outputs[0]
        tensors = [v for v in node.inputs if v is not None and not v.is_constant]
        if len(node.outputs) != 1 or not tensors or not any(v in self.blocked for v in tensors):
            return False
        padded = {self.padded[v] for v in tensors if v in self.padded}
        b = self.lanes if padded else self.block(out)
        if not b or any(v.type.shape != out.type.shape or self.block(v) != b for v in tensors):
            return False
        if padded and (len(padded) > 1 or any(v not in self.padded for v in tensors)):
            return False  # padded twins of other block counts, or an unpadded one: NCHW
        blocks = next(iter(padded)) if padded else -(-out.type.shape[1] // b)
        inputs: list[Value | None] = []
        for v in node.inputs:
            if v is None or not v.is_constant:
                inputs.append(v)
                continue
            packed = _blocked_constant(v, out.type.shape[1], b, blocks)
            if packed is None:
                return False
            inputs.append(packed)
        new_inputs = tuple(self.to_blocked(v) if v is not None and not v.is_constant else v
                           for v in inputs)
        if padded:
            self.padded[out] = blocks
        y = self.blocked_output(out, b)
        self.nodes.append(dataclasses.replace(node, inputs=new_inputs, outputs=(y,)))
        return True

    def pool(self, node: Node) -> bool:
        x = node.inputs[0]
        if x is None or x not in self.blocked or x.type.ndim != 4:
            return False
        extra = node.outputs[1:]
        if any(self._used(v) for v in extra):
            return False  # MaxPool's Indices are NCHW positions
        attrs = dict(node.attrs)
        attrs["kernel_shape"] = (*attrs["kernel_shape"], 1)
        for key in ("strides", "dilations"):
            if attrs.get(key):
                attrs[key] = (*attrs[key], 1)
        pads = attrs.get("pads")
        if pads:
            attrs["pads"] = (pads[0], pads[1], 0, pads[2], pads[3], 0)
        twin = self.blocked[x]
        types = get_op(node.op).infer(attrs, [twin.type])
        b = twin.type.shape[4]
        n, c, h, w = node.outputs[0].type.shape
        if types[0].shape != (n, twin.type.shape[1], h, w, b):
            return False
        if x in self.padded:
            self.padded[node.outputs[0]] = self.padded[x]
        y = self.blocked_output(node.outputs[0], b)
        rest = tuple(Value(self.name(v.name), t) for v, t in zip(extra, types[1:]))
        self.nodes.append(Node(node.op, node.name, (twin,), (y, *rest), attrs))
        return True

    def concat(self, node: Node) -> bool:
        out = node.outputs[0]
        axis = int(node.attrs.get("axis", 0))
        tensors = [v for v in node.inputs if v is not None]
        if out.type.ndim != 4 or axis not in (1, -3) or not tensors or \
                not any(v in self.blocked for v in tensors):
            return False
        b = self.block(out)
        if not b or any(v.is_constant or self.block(v) != b for v in tensors):
            return False
        inputs = tuple(self.to_blocked(v) for v in tensors)
        y = self.blocked_output(out, b)
        self.nodes.append(dataclasses.replace(node, inputs=inputs, outputs=(y,),
                                              attrs={**node.attrs, "axis": 1}))
        return True

    def _used(self, v: Value) -> bool:
        return v in self._readers or any(o is v for o in self.graph.outputs)

    def run(self) -> Graph:
        self._readers: dict[Value, list[Node]] = {}
        for n in self.graph.nodes:
            for v in n.inputs:
                if v is not None:
                    self._readers.setdefault(v, []).append(n)
        for node in self.graph.nodes:
            self.visit(node)
        for v in self.graph.outputs:
            self.to_plain(v)
        if not any(n.op == "ConvNCHWc" for n in self.nodes):
            return self.graph
        return rebuild(self.graph, self.nodes)


def _is_elementwise(op: str) -> bool:
    from ember.ops import elementwise

    opdef = elementwise.OPS.get(op)
    return opdef is not None and opdef.pattern <= Pattern.BROADCAST and opdef.num_outputs == 1


def _blocked_constant(v: Value, channels: int, b: int, blocks: int) -> Value | None:
    """A constant operand of an elementwise op, re-laid out for blocked tensors of `blocks`
    blocks of b: a scalar (any shape of size 1) as it is, a per-channel vector ([C, 1, 1] /
    [1, C, 1, 1]) as [1, blocks, 1, 1, b] (zeros in the padding channels of a padded
    tensor); None for anything else."""
    assert v.data is not None
    if v.data.size == 1:
        return v
    shape = (1,) * (4 - v.type.ndim) + v.type.shape if v.type.ndim <= 4 else None
    if shape is None or shape[0] != 1 or shape[1] != channels or shape[2:] != (1, 1):
        return None
    pad = blocks * b - channels  # padding channels (of a padded tensor) take zeros
    data = np.pad(v.data.reshape(channels), (0, pad)).reshape(1, blocks, 1, 1, b)
    return make_constant(f"{v.name}_c{b}", data)


def convert_layout(graph: Graph, rule: LayoutRule | None = None) -> Graph:
    """Convert convolutions and the layout-agnostic ops around them to NCHW[x]c."""
    return _Converter(graph, rule or LayoutRule()).run()


def layout_pass(rule: LayoutRule) -> Callable[[Graph], Graph]:
    """convert_layout with a fixed rule, as a pipeline pass (e.g. block = a target's lanes)."""
    def convert_layout_with_rule(graph: Graph) -> Graph:
        return convert_layout(graph, rule)

    return convert_layout_with_rule


__all__: Sequence[str] = ("WINOGRAD_F4_MIN_TILES", "WINOGRAD_MIN_CHANNELS", "LayoutRule",
                          "block_of", "convert_layout", "layout_pass", "use_winograd",
                          "winograd_min_channels", "winograd_min_width", "winograd_tile")
