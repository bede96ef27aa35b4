"""Quantized models → integer graphs, for the integer data types (docs/integer.md).

Two forms of quantized ONNX model come in: the **QDQ** form that onnxruntime's
``quantize_static`` writes (every activation passes ``QuantizeLinear → DequantizeLinear``;
weights and biases are integer initializers behind ``DequantizeLinear``) and the
**operator** form (``QLinearConv``, ``QLinearMatMul`` on integer tensors). Both become one
graph whose every tensor is an integer tensor with a scale and a zero point, and whose nodes
are the integer operators of :mod:`compiler_lite.ops.integer` (domain ``tcu``):

=============  ====================================================================
``QConv``      Conv / QLinearConv: integer weights (per-channel scales), the bias as an
               exact integer, output requantized, an optional clamp (a Relu or Clip
               between the Conv and its QuantizeLinear)
``QGemm``      Gemm / MatMul with a constant operand / QLinearMatMul, likewise
``QAdd``       Add of two activations, each rescaled to the output
``QAveragePool``  GlobalAveragePool, AveragePool (padding counted)
``QMul``       Mul of two activations (one may broadcast)
``QMatMul``    MatMul / QLinearMatMul of two activations (attention's Q·Kᵀ and P·V)
``QSoftmax``   Softmax (INT8 as onnxruntime's QLinearSoftmax; INT16)
``QLayerNorm`` LayerNormalization over the last axis
``QAffine``    BatchNormalization not folded into a convolution; HardSigmoid; a chain
               of arithmetic with scalar constants (one a and b for every element)
``QLeakyRelu`` LeakyRelu
``QRescale``   Relu or Clip of its own; an input of a view quantized otherwise than its
               output (Concat of two branches)
``QTable``     a chain of element-wise float functions between DequantizeLinear and
               QuantizeLinear (Sigmoid, Tanh, Erf, GELU, Exp, …, and Add, Sub, Mul, Div,
               Pow with a scalar constant): the quantized output for every input value,
               computed once (onnxruntime's own table kernels do the same)
=============  ====================================================================

Operators that only move values (Reshape, Flatten, Transpose, MaxPool, Concat, Split, …)
stay as they are, on the integer tensors, when their inputs and outputs share one
quantization (onnxruntime's QDQ form makes them so). Anything else is refused with one error
naming every node. The graph's inputs and outputs keep the model's names; their
quantization (``Graph.io_quant``) tells the host how to quantize inputs and dequantize
outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tcu_hw import numeric
from tcu_hw.errors import CompileError

from .frontend import Graph, Node

DOMAIN = "tcu"

#: operators that only move values: kept on integer tensors when the quantization agrees
VIEWS = frozenset({"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity",
                   "Dropout", "Slice", "Split", "Concat", "MaxPool", "GlobalMaxPool",
                   "Resize", "Upsample"})

QUANT_OPS = ("QuantizeLinear", "DequantizeLinear")

#: one-input float functions a table takes (besides those of :mod:`.ops.lut`)
SIMPLE_FUNCTIONS = {"Neg": np.negative, "Abs": np.abs}
#: binary operators that are table functions when one operand is a scalar constant
SCALAR_ARITHMETIC = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                     "Div": np.divide, "Pow": np.power}


@dataclass(frozen=True)
class QParams:
    """One tensor's quantization: ``real = scale · (q − zero_point)`` (per tensor)."""

    scale: float
    zero_point: int

    def same(self, other: QParams) -> bool:
        """Whether ``other`` is the same quantization (scales compared as float32)."""
        return np.float32(self.scale) == np.float32(other.scale) and \
            self.zero_point == other.zero_point


@dataclass(frozen=True)
class Weights:
    """A constant behind ``DequantizeLinear``: integers, scale(s) and zero point(s)."""

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


def is_quantized(g: Graph) -> bool:
    """Whether the model carries quantization (QDQ pairs or QLinear operators)."""
    return any(n.op in QUANT_OPS or n.op.startswith("QLinear") for n in g.nodes)


class _Converter:
    """State of one conversion (see :func:`integer_graph`)."""

    def __init__(self, g: Graph, dt) -> None:
        self.g, self.dt = g, dt
        self.params: dict[str, QParams] = {}      # integer tensor → its quantization
        self.alias: dict[str, str] = {}           # quantized name → the name it takes
        self.deq: dict[str, str] = {}             # float tensor → integer tensor it holds
        self.weights: dict[str, Weights] = {}
        self.nodes: list[Node] = []
        self.shapes = dict(g.shapes)
        self.problems: list[str] = []
        self.notes: list[str] = []                # compile notes (a table's NaN inputs)
        self.io: dict[str, QParams] = {}

    # ------------------------------------------------------------------------- helpers

    def fail(self, node: Node, why: str) -> None:
        """Note a problem with ``node`` (all are raised together at the end)."""
        self.problems.append(f"{node.label}: {why}")

    def scalar_params(self, node: Node, scale: str, zp: str | None) -> QParams | None:
        """One tensor's quantization from constants ``scale`` and ``zp`` (signed, of the
        type's width); None, with a problem noted, otherwise."""
        g = self.g
        if scale not in g.consts or (zp and zp not in g.consts):
            self.fail(node, "its scale and zero point must be constants")
            return None
        s = np.asarray(g.consts[scale], dtype=np.float32)
        z = np.asarray(g.consts[zp]) if zp else np.zeros(1, dtype=np.int64)
        if s.size != 1 or z.size != 1:
            self.fail(node, "activations need one scale and zero point per tensor (found "
                            f"{s.size}); only weights may be quantized per channel")
            return None
        if not zp:
            self.fail(node, f"has no zero point, so its type is uint8 (ONNX's default); "
                            f"{self.dt.name} needs signed {self.dt.width}-bit activations "
                            f"(quantize with activation_type=QInt{self.dt.width})")
            return None
        if z.dtype.kind != "i" or z.dtype.itemsize * 8 != self.dt.width:
            self.fail(node, f"activation type {z.dtype} does not match the architecture's "
                            f"{self.dt.name} (signed {self.dt.width}-bit; quantize with "
                            f"activation_type=QInt{self.dt.width}, or choose an "
                            f"architecture of the model's type)")
            return None
        if not float(s.reshape(-1)[0]) > 0:
            self.fail(node, f"scale {float(s.reshape(-1)[0])} must be positive")
            return None
        return QParams(float(s.reshape(-1)[0]), int(z.reshape(-1)[0]))

    def name(self, t: str) -> str:
        """The name integer tensor ``t`` takes in the graph (a model input's or output's)."""
        return self.alias.get(t, t)

    def activation(self, node: Node, t: str) -> tuple[str, QParams] | None:
        """The integer tensor behind float (or integer) tensor ``t``."""
        if t in self.deq:
            q = self.deq[t]
            return self.name(q), self.params[q]
        if t in self.params:
            return self.name(t), self.params[t]
        if t in self.weights or t in self.g.consts:
            self.fail(node, f"input '{t}' is a constant; the integer {node.op} takes two "
                            f"activations (constant operands are supported by Conv, Gemm, "
                            f"MatMul and BatchNormalization)")
            return None
        self.fail(node, f"input '{t}' is not quantized: the integer path needs every "
                        f"activation to pass QuantizeLinear → DequantizeLinear (quantize the "
                        f"model with onnxruntime.quantization.quantize_static, or compile "
                        f"with --quantize)")
        return None

    def weight(self, node: Node, t: str, what: str) -> Weights | None:
        """The quantized constant ``t`` (signed, the type's width, symmetric); None, with a
        problem noted, otherwise."""
        w = self.weights.get(t)
        if w is None:
            self.fail(node, f"the {what} '{t}' must be an integer constant behind "
                            f"DequantizeLinear (a quantized weight)")
            return None
        if w.q.dtype.itemsize * 8 != self.dt.width or w.q.dtype.kind != "i":
            self.fail(node, f"the {what} '{t}' is {w.q.dtype}; {self.dt.name} needs signed "
                            f"{self.dt.width}-bit weights (weight_type=QInt{self.dt.width})")
            return None
        if np.any(w.zero_point != 0):
            self.fail(node, f"the {what} '{t}' has non-zero zero points; weights must be "
                            f"quantized symmetrically")
            return None
        return w

    def output(self, node: Node, t: str, fuse: bool = True
               ) -> tuple[str, QParams, tuple | None] | None:
        """The integer tensor float output ``t`` becomes (through its QuantizeLinear, and,
        with ``fuse``, a Relu or Clip before it: returned as the clamp range, in integers;
        :meth:`_fused` says which)."""
        g = self.g
        users = g.consumers(t)
        act = None
        if fuse and self._fusable(t):
            act = users[0]
            t = act.outputs[0]
            users = g.consumers(t)
        if len(users) != 1 or users[0].op != "QuantizeLinear" or t in g.outputs:
            self.fail(node, f"its output '{t}' must go to exactly one QuantizeLinear")
            return None
        q = users[0]
        p = self.scalar_params(q, q.inputs[1], q.inputs[2] if len(q.inputs) > 2 else None)
        if p is None:
            return None
        self.params[q.outputs[0]] = p
        self.shapes[q.outputs[0]] = self.shapes.get(t, g.shapes.get(node.outputs[0]))
        return self.name(q.outputs[0]), p, self.clip_of(act, p)

    def clip_of(self, act: Node | None, p: QParams) -> tuple[int, int] | None:
        """A Relu's or Clip's bounds as integers of output quantization ``p`` (None when
        the type's range is tighter): quantization is monotone, so clamping the quantized
        value to the quantized bounds is quantizing the clamped value."""
        if act is None:
            return None
        lo, hi = 0.0, np.inf
        if act.op == "Clip":
            bad = [i for i in act.inputs[1:3] if i and i not in self.g.consts]
            if bad:
                self.fail(act, f"its bound '{bad[0]}' must be a constant")
            lo = _const_or(self.g, act.inputs[1:2], -np.inf)
            hi = _const_or(self.g, act.inputs[2:3], np.inf)
        return self.bounds(lo, hi, p)

    def bounds(self, lo: float, hi: float, p: QParams) -> tuple[int, int] | None:
        """Real bounds ``lo``..``hi`` as integers of quantization ``p`` (None: no tighter
        than the type's range)."""
        dt = self.dt
        got = tuple(int(numeric.quantize(v, p.scale, p.zero_point, dt)[0])
                    for v in (max(lo, -3e38), min(hi, 3e38)))
        return None if got == (dt.min_raw, dt.max_raw) else got

    # ----------------------------------------------------------------------- the walk

    def run(self) -> Graph:
        """Convert every node; the integer graph, or one CompileError listing every node
        that cannot be taken."""
        g = self.g
        self._collect()
        for node in g.nodes:
            if node.op in QUANT_OPS or node.op in ("Relu", "Clip") and self._fused(node):
                continue
            self._convert(node)
        if self.problems:
            raise CompileError(f"{g.source}: {len(self.problems)} node(s) of the quantized "
                               f"model cannot be compiled to {self.dt.name}:\n  "
                               + "\n  ".join(self.problems)
                               + "\nquantized operators: " + ", ".join(sorted(self.handlers))
                               + " (MatMul and Gemm with constant weights), and "
                               + ", ".join(sorted(VIEWS)) + " with one quantization in "
                                 "and out (an input quantized otherwise is rescaled)")
        inputs = list(g.inputs)
        outputs = [self._graph_output(o) for o in g.outputs]
        consts = {k: v for k, v in g.consts.items()}
        out = Graph(g.source, g.opset, self.nodes, consts, self.shapes, inputs, outputs,
                    list(g.notes) + self.notes, dict(g.resize_scales), list(g.assumed_dims))
        out.io_quant = dict(self.io)
        return out

    def _fusable(self, t: str) -> bool:
        """Whether a Relu/Clip is the only reader of float tensor ``t``."""
        users = self.g.consumers(t)
        return len(users) == 1 and users[0].op in ("Relu", "Clip") and t not in self.g.outputs

    def _fused(self, node: Node) -> bool:
        """A Relu/Clip that an arithmetic operator before it takes as its clamp (its
        :meth:`output`); after a view or a Relu it is an operator of its own, after a table
        function a function of the chain (:meth:`function`)."""
        maker = self.g.producer(node.inputs[0])
        return maker is not None and maker.op not in ("Relu", "Clip") and \
            maker.op in self.handlers and self.function(maker) is None and \
            self._fusable(node.inputs[0])

    def _collect(self) -> None:
        """Weights, input quantization and the QDQ pairs."""
        g = self.g
        for node in g.nodes:
            if node.op == "DequantizeLinear" and g.is_const(node.inputs[0]):
                s = np.asarray(g.consts[node.inputs[1]], dtype=np.float32)
                q = np.asarray(g.consts[node.inputs[0]])
                z = np.asarray(g.consts[node.inputs[2]]) if len(node.inputs) > 2 and \
                    node.inputs[2] else np.zeros(1, dtype=np.int64)
                self.weights[node.outputs[0]] = Weights(q, s, z, int(node.attr("axis", 1)))
        for x in g.inputs:
            users = g.consumers(x)
            if not users or any(u.op != "QuantizeLinear" for u in users):
                raise CompileError(f"{g.source}: input '{x}' must go only to QuantizeLinear "
                                   f"nodes in a quantized model (the host quantizes it)")
            ps = []
            for u in users:
                p = self.scalar_params(u, u.inputs[1], u.inputs[2] if len(u.inputs) > 2
                                       else None)
                if p is not None:
                    ps.append(p)
                    self.alias[u.outputs[0]] = x
                    self.params[u.outputs[0]] = p
            if ps and any(not p.same(ps[0]) for p in ps):
                raise CompileError(f"{g.source}: input '{x}' is quantized in two ways; the "
                                   f"host quantizes an input once: one scale and zero point")
            if ps:
                self.io[x] = ps[0]
                self.params[x] = ps[0]
        for node in g.nodes:
            if node.op == "DequantizeLinear" and not g.is_const(node.inputs[0]):
                p = self.scalar_params(node, node.inputs[1],
                                       node.inputs[2] if len(node.inputs) > 2 else None)
                src = node.inputs[0]
                if p is not None:
                    self.params.setdefault(src, p)
                    if not p.same(self.params[src]):
                        self.fail(node, "dequantizes with other parameters than its tensor "
                                        "was quantized with")
                    self.deq[node.outputs[0]] = src

    def _graph_output(self, y: str) -> str:
        """Graph output ``y`` (a DequantizeLinear's): the integer tensor behind it takes its
        name, and its quantization goes to the host."""
        g = self.g
        maker = g.producer(y)
        if maker is None or maker.op != "DequantizeLinear":
            raise CompileError(f"{g.source}: output '{y}' must come from a "
                               f"DequantizeLinear in a quantized model")
        q = maker.inputs[0]
        if q not in self.params:
            raise CompileError(f"{g.source}: output '{y}' dequantizes '{q}', which is not a "
                               f"quantized activation")
        p = self.params[q]
        target = self.name(q)
        self.shapes[y] = g.shapes[y]
        self.io[y] = p
        if target in g.outputs:             # another output already took the tensor's name
            self.nodes.append(Node("Identity", f"{y}:copy", [target], [y], {}))
            return y
        # the tensor takes the output's name (the host reads it by that name)
        for node in self.nodes:
            node.outputs = [y if o == target else o for o in node.outputs]
            node.inputs = [y if i == target else i for i in node.inputs]
        self.alias[q] = y
        return y

    @property
    def handlers(self) -> dict:
        """Operator → its conversion (besides the views)."""
        return {"Conv": self._conv, "QLinearConv": self._qlinear_conv,
                "Gemm": self._gemm, "MatMul": self._gemm,
                "QLinearMatMul": self._qlinear_matmul, "Add": self._add,
                "GlobalAveragePool": self._average, "AveragePool": self._average,
                "Mul": self._mul, "BatchNormalization": self._affine,
                "LeakyRelu": self._leaky, "HardSigmoid": self._hard_sigmoid,
                "Relu": self._clamp, "Clip": self._clamp, "Softmax": self._softmax,
                "LayerNormalization": self._layer_norm}

    def _convert(self, node: Node) -> None:
        """One node: a table function, its handler, a view, or a problem noted."""
        handler = self.handlers.get(node.op)
        if self.function(node) is not None:
            self._table(node)
        elif handler is not None:
            handler(node)
        elif node.op in ("Resize", "Upsample") and node.attr("mode", "nearest") != "nearest":
            self.fail(node, f"a quantized Resize must be mode 'nearest' (it moves values); "
                            f"mode '{node.attr('mode')}' interpolates")
        elif node.op in VIEWS:
            self._view(node)
        else:
            self.fail(node, "has no integer lowering")

    # --------------------------------------------------------------- table functions

    def function(self, node: Node):
        """The float function of element-wise ``node`` of one activation (a function of
        :mod:`.ops.lut`, Neg, Abs, or arithmetic with a scalar constant), else None."""
        from .ops.lut import function_spec           # (ops imports this module)
        if node.op in SIMPLE_FUNCTIONS and len(node.inputs) == 1:
            return SIMPLE_FUNCTIONS[node.op]
        if node.op in ("Relu", "Clip"):
            return self._clamp_function(node)
        if node.op in SCALAR_ARITHMETIC and len(node.inputs) == 2:
            consts = [self.constant(i) for i in node.inputs]
            if (consts[0] is None) == (consts[1] is None):
                return None
            c = next(v for v in consts if v is not None)
            if c.size != 1:
                return None
            c, fn = float(np.float32(c.reshape(-1)[0])), SCALAR_ARITHMETIC[node.op]
            return (lambda x: fn(x, c)) if consts[1] is not None else (lambda x: fn(c, x))
        try:
            one = len([i for i in node.inputs if i]) == 1
            return function_spec(node)[0] if one else None
        except KeyError:
            return None

    def _clamp_function(self, node: Node):
        """A Relu or Clip (constant bounds) after a table function, as a function of the
        chain; None elsewhere (a clamp of its own, or an operator's fused clamp)."""
        x = node.inputs[0]
        maker = self.g.producer(x)
        if x in self.deq or x in self.params or maker is None or \
                self.function(maker) is None or \
                any(i and i not in self.g.consts for i in node.inputs[1:3]):
            return None
        lo = _const_or(self.g, node.inputs[1:2], -np.inf) if node.op == "Clip" else 0.0
        hi = _const_or(self.g, node.inputs[2:3], np.inf) if node.op == "Clip" else np.inf
        return lambda v: np.clip(v, lo, hi)

    def _activation_input(self, node: Node) -> str:
        """The input of element-wise ``node`` that is not a constant."""
        return next(i for i in node.inputs if i and self.constant(i) is None)

    def _table(self, node: Node) -> None:
        """The last function of a chain of element-wise functions (its output quantized)
        becomes one QTable over the chain's integer input; the chain's earlier functions
        are taken with it."""
        g = self.g
        if node.outputs[0] in g.outputs:
            self.fail(node, f"computes the model's output '{node.outputs[0]}' in float "
                            f"(onnxruntime's quantizer leaves {node.op} unquantized at an "
                            f"output): end the model before it (-o "
                            f"'{self._activation_input(node)}') and apply it on the host")
            return
        users = g.consumers(node.outputs[0])
        if users and all(self.function(u) is not None for u in users):
            return              # inside a chain: each chain's last function builds its table
        chain, t = [node], self._activation_input(node)
        while t not in self.deq and t not in self.params:
            maker = g.producer(t)
            if maker is None or self.function(maker) is None:
                break
            chain.insert(0, maker)
            t = self._activation_input(maker)
        got = self._operands(replace(node, inputs=[t]), 1)
        if got is None:
            return
        (x, px), (y, py, clip) = got
        line = _affine_chain(self, chain)
        if line is not None:            # an affine map: no table needed (and exact on INT16)
            # (INT8 also gets the exact table: with lookup tables it reproduces onnxruntime's
            # float32 rounding, which breaks the ties an affine map meets when the output's
            # scale matches the input's, as GELU's "+ 1" after Erf does)
            table, exact = self._table_values(node, chain, px, py, clip) \
                if self.dt.width == 8 else (None, None)
            self._emit("QAffine", node, [x], y, a=np.array([line[0]]),
                       b=np.array([line[1]]), x=px, y=py, clip=clip, table=table,
                       exact=exact, functions=" → ".join(n.op for n in chain))
            return
        table, exact = self._table_values(node, chain, px, py, clip)
        self._emit("QTable", node, [x], y, table=table, exact=exact, x=px, y=py,
                   functions=" → ".join(n.op for n in chain))

    def _table_values(self, node: Node, chain, px: QParams, py: QParams, clip):
        """(the quantized output for every input value, the same before rounding) of
        ``chain`` from quantization ``px`` to ``py``, clamped to ``clip``; an input whose
        value is not a number (Log or Sqrt of a negative, 0/0) is noted and gives 0."""
        dt = self.dt
        xs = np.arange(dt.min_raw, dt.max_raw + 1)
        v = numeric.dequantize(xs, px.scale, px.zero_point).astype(np.float64)
        with np.errstate(all="ignore"):
            for step in chain:          # every tensor between the nodes is float32
                v = np.asarray(self.function(step)(v), dtype=np.float32).astype(np.float64)
            nan = np.isnan(v)
            if nan.any():
                first = float(numeric.dequantize(xs[nan][:1], px.scale, px.zero_point)[0])
                self.notes.append(
                    f"{node.label}: {int(nan.sum())} of the {len(xs)} input values (from "
                    f"{first:g}) make {' → '.join(n.op for n in chain)} not a number; the "
                    f"table gives them the output's zero point (onnxruntime's result for a "
                    f"NaN depends on the platform)")
            v = np.clip(np.nan_to_num(v, nan=0.0, posinf=3e38, neginf=-3e38), -3e38, 3e38)
            q = numeric.quantize(v, py.scale, py.zero_point, dt)[0]
            lo, hi = clip if clip is not None else (dt.min_raw, dt.max_raw)
            # before rounding, as QuantizeLinear divides (float32): the steps agree with q
            exact = np.clip((v.astype(np.float32) / np.float32(py.scale)).astype(np.float64)
                            + py.zero_point, lo, hi)
        return np.clip(q, lo, hi).astype(np.int64), exact

    # ---------------------------------------------------------------------- operators

    def _emit(self, op: str, node: Node, inputs, output: str, **attrs) -> None:
        """Append integer operator ``op`` (domain tcu) made from ``node``."""
        self.nodes.append(Node(op, node.name, list(inputs), [output], attrs, DOMAIN))

    def _bias(self, node: Node, name: str | None, acc_scale: np.ndarray, channels: int):
        """The bias as exact integers at the accumulator's scale ``acc_scale``: a quantized
        constant (requantized if its scale differs), an operator-form integer bias (already
        at that scale), or a float constant."""
        if not name:
            return np.zeros(channels, dtype=np.int64)
        g = self.g
        if node.op.startswith("QLinear"):
            b = np.asarray(g.consts[name]) if name in g.consts else None
            if b is None or b.dtype.kind != "i" or b.size != channels:
                self.fail(node, f"the bias '{name}' must be a constant int32 vector of "
                                f"{channels}")
                return None
            return b.astype(np.int64).reshape(channels)
        if name in self.weights:
            w = self.weights[name]
            if np.all(np.float32(w.scale) == np.float32(acc_scale)) and \
                    not np.any(w.zero_point):
                return w.q.astype(np.int64).reshape(channels)
            return np.rint(self.constant(name).reshape(channels) / acc_scale).astype(np.int64)
        if name in g.consts:
            return np.rint(np.asarray(g.consts[name], dtype=np.float64).reshape(channels)
                           / acc_scale).astype(np.int64)
        self.fail(node, f"the bias '{name}' must be a constant")
        return None

    def _linear(self, node: Node, x: str, w: Weights | None, bias_name, out,
                op: str, weights: np.ndarray, **attrs) -> None:
        """A QConv or QGemm: input ``x``, weights ``w``, bias, output ``out`` (from
        :meth:`output`)."""
        got = self.activation(node, x)
        if got is None or w is None or out is None:
            return
        (xq, px), (yq, py, clip) = got, out
        channels = weights.shape[0] if op == "QConv" else weights.shape[1]
        ws = np.broadcast_to(w.scale.astype(np.float32).reshape(-1), (channels,))
        acc_scale = (np.float32(px.scale) * ws).astype(np.float32)
        bias = self._bias(node, bias_name, acc_scale.astype(np.float64), channels)
        if bias is None:
            return
        self._emit(op, node, [xq], yq, w=weights.astype(np.int64), w_scale=ws, x=px, y=py,
                   bias=bias, clip=clip, **attrs)

    def _conv(self, node: Node) -> None:
        """Conv with quantized weights (per output channel) and bias."""
        w = self.weight(node, node.inputs[1], "weights")
        if w is not None and w.scale.size > 1 and w.axis not in (0, -4):
            self.fail(node, "per-channel weight scales must be along the output channels")
            return
        attrs = {k: v for k, v in node.attrs.items()}
        self._linear(node, node.inputs[0], w, node.inputs[2] if len(node.inputs) > 2
                     else None, self.output(node, node.outputs[0]), "QConv",
                     w.q if w is not None else None, **attrs)

    def _gemm(self, node: Node) -> None:
        """Gemm (transB allowed) or MatMul whose second operand is quantized weights."""
        a, b = node.inputs[:2]
        if node.op == "Gemm" and (node.attr("transA", 0) or
                                  float(node.attr("alpha", 1.0)) != 1.0 or
                                  float(node.attr("beta", 1.0)) != 1.0):
            self.fail(node, "a quantized Gemm needs transA = 0, alpha = beta = 1")
            return
        if node.op == "MatMul" and self._computed(b):
            self._product(node)
            return
        w = self.weight(node, b, "weights")
        if w is None:
            return
        q = w.q.T if node.attr("transB", 0) else w.q
        if q.ndim != 2:
            self.fail(node, f"weights of shape {list(w.q.shape)}: a matrix is needed")
            return
        per = w.scale.size > 1
        if per and w.axis not in ((0, -2) if node.attr("transB", 0) else (1, -1)):
            self.fail(node, "per-channel weight scales must be along the output features")
            return
        self._linear(node, a, w, node.inputs[2] if len(node.inputs) > 2 else None,
                     self.output(node, node.outputs[0]), "QGemm", q)

    def _computed(self, t: str) -> bool:
        """Whether ``t`` is an activation (not a constant)."""
        return t not in self.weights and t not in self.g.consts and \
            (t in self.deq or t in self.params)

    def _product(self, node: Node) -> None:
        """MatMul of two activations (attention's Q·Kᵀ and P·V): exact integer sums with
        both zero points taken off, one Requantize by s_a·s_b / s_y."""
        got = self._operands(node, 2)
        if got is None:
            return
        a, b, out = got
        self._emit("QMatMul", node, [a[0], b[0]], out[0], a=a[1], b=b[1], y=out[1],
                   clip=out[2])

    def _softmax(self, node: Node) -> None:
        """Softmax (onnxruntime's QLinearSoftmax semantics, :mod:`.ops.qsoftmax`)."""
        got = self._operands(node, 1, fuse=False)
        if got is None:
            return
        (x, px), (y, py, _) = got
        self._emit("QSoftmax", node, [x], y, x=px, y=py, axis=int(node.attr("axis", -1)))

    def _layer_norm(self, node: Node) -> None:
        """LayerNormalization over the last axis, constant scale and bias
        (:mod:`.ops.qnorm`)."""
        got = self._operands(node, 1)
        if got is None:
            return
        (x, px), (y, py, clip) = got
        shape = self.shapes.get(node.inputs[0]) or self.g.shapes.get(node.inputs[0])
        axis = int(node.attr("axis", -1))
        if shape is None or axis % len(shape) != len(shape) - 1:
            self.fail(node, f"an integer LayerNorm normalizes over the last axis (axis -1); "
                            f"this one has axis {axis}")
            return
        gamma = self.constant(node.inputs[1])
        beta = self.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] \
            else np.zeros(shape[-1])
        if gamma is None or beta is None:
            self.fail(node, "its scale and bias must be constants")
            return
        C = shape[-1]
        if float(node.attr("epsilon", 1e-5)) < 0:
            self.fail(node, f"its epsilon {float(node.attr('epsilon')):g} is negative "
                            f"(allowed: ≥ 0)")
            return
        self._emit("QLayerNorm", node, [x], y, x=px, y=py, clip=clip,
                   gamma=np.broadcast_to(gamma.reshape(-1), (C,)).copy(),
                   beta=np.broadcast_to(beta.reshape(-1), (C,)).copy(),
                   epsilon=float(node.attr("epsilon", 1e-5)))

    def _qlinear_conv(self, node: Node) -> None:
        """QLinearConv: integer in, integer out, its int32 bias at s_x·s_w."""
        ins = node.inputs
        x = self._qlinear_input(node, ins[0], ins[1], ins[2])
        w = self._qlinear_weights(node, ins[3], ins[4], ins[5], 0)
        self._qlinear(node, x, w, ins[6], ins[7], ins[8] if len(ins) > 8 else None, "QConv",
                      w.q if w is not None else None,
                      **{k: v for k, v in node.attrs.items()})

    def _qlinear_matmul(self, node: Node) -> None:
        """QLinearMatMul with constant integer weights (scales per output column), or of
        two integer activations."""
        ins = node.inputs
        if self._computed(ins[3]):
            a = self._qlinear_input(node, ins[0], ins[1], ins[2])
            b = self._qlinear_input(node, ins[3], ins[4], ins[5])
            p = self.scalar_params(node, ins[6], ins[7])
            if a is None or b is None or p is None:
                return
            y = node.outputs[0]
            self.params[y] = p
            self._emit("QMatMul", node, [self.name(a), self.name(b)], self.name(y),
                       a=self.params[a], b=self.params[b], y=p, clip=None)
            return
        x = self._qlinear_input(node, ins[0], ins[1], ins[2])
        w = self._qlinear_weights(node, ins[3], ins[4], ins[5], 1)
        self._qlinear(node, x, w, ins[6], ins[7], None, "QGemm",
                      w.q if w is not None else None)

    def _qlinear_input(self, node: Node, t, s, z):
        """An operator-form input: an integer activation read with its own quantization."""
        p = self.scalar_params(node, s, z)
        if p is None:
            return None
        if t not in self.params:
            self.fail(node, f"input '{t}' is not an integer activation")
            return None
        if not p.same(self.params[t]):
            self.fail(node, f"input '{t}' is read with other parameters than it was made with")
            return None
        return t

    def _qlinear_weights(self, node: Node, t, s, z, axis) -> Weights | None:
        """An operator-form node's weights, scales and zero points (constants)."""
        g = self.g
        if not all(k in g.consts for k in (t, s, z)):
            self.fail(node, "its weights, scales and zero points must be constants")
            return None
        self.weights[t] = Weights(np.asarray(g.consts[t]),
                                  np.asarray(g.consts[s], dtype=np.float32),
                                  np.asarray(g.consts[z]), axis)
        return self.weight(node, t, "weights")

    def _qlinear(self, node, x, w, ys, yz, bias_name, op, weights, **attrs) -> None:
        """The integer operator of an operator-form node (output quantization from its
        inputs)."""
        p = self.scalar_params(node, ys, yz)
        if x is None or w is None or p is None:
            return
        y = node.outputs[0]
        self.params[y] = p
        self._linear(node, x, w, bias_name, (self.name(y), p, None), op, weights, **attrs)

    def _operands(self, node: Node, count: int, fuse: bool = True):
        """(the integer tensor behind each of the first ``count`` inputs, then the output
        from :meth:`output`), or None when any is refused (problems noted for each)."""
        got = [self.activation(node, i) for i in node.inputs[:count]]
        out = self.output(node, node.outputs[0], fuse)
        return None if out is None or any(g is None for g in got) else (*got, out)

    def _add(self, node: Node) -> None:
        """Add of two activations of one shape, each rescaled to the output."""
        got = self._operands(node, 2)
        if got is None:
            return
        a, b, out = got
        if self.shapes.get(node.inputs[0]) != self.shapes.get(node.inputs[1]):
            self.fail(node, "a quantized Add needs operands of one shape (no broadcast)")
            return
        self._emit("QAdd", node, [a[0], b[0]], out[0], a=a[1], b=b[1], y=out[1], clip=out[2])

    def _average(self, node: Node) -> None:
        """GlobalAveragePool, or AveragePool whose windows are whole or count padding."""
        got = self._operands(node, 1)
        if got is None:
            return
        x, out = got
        attrs = {k: v for k, v in node.attrs.items()}
        if node.op == "AveragePool":
            auto = node.attr("auto_pad", "NOTSET") or "NOTSET"
            padded = any(node.attr("pads", []) or []) or auto not in ("NOTSET", "VALID")
            why = ("ceil_mode = 1 (partial windows)" if node.attr("ceil_mode", 0) else
                   "dilations" if any(d != 1 for d in node.attr("dilations", []) or []) else
                   "padding not counted (count_include_pad = 0)"
                   if padded and not node.attr("count_include_pad", 0) else None)
            if why:
                self.fail(node, f"a quantized AveragePool needs every window whole or its "
                                f"padding counted, no dilations; this one has {why}")
                return
        self._emit("QAveragePool", node, [x[0]], out[0], x=x[1], y=out[1], clip=out[2],
                   **attrs)

    def _mul(self, node: Node) -> None:
        """Product of two activations (a squeeze-excite gate broadcasts per channel)."""
        got = self._operands(node, 2)
        if got is None:
            return
        a, b, out = got
        shape = self.shapes.get(node.outputs[0])
        if self.shapes.get(node.inputs[0]) != shape:
            a, b = b, a
            if self.shapes.get(node.inputs[1]) != shape:
                self.fail(node, "a quantized Mul needs one operand of the output's shape "
                                "(the other may broadcast)")
                return
        self._emit("QMul", node, [a[0], b[0]], out[0], a=a[1], b=b[1], y=out[1], clip=out[2])

    def _affine(self, node: Node) -> None:
        """BatchNormalization not folded into a convolution: ``y = a·x + b`` per channel."""
        got = self._operands(node, 1)
        if got is None:
            return
        x, out = got
        values = [self.constant(i) for i in node.inputs[1:5]]
        if any(v is None for v in values):
            self.fail(node, "its scale, bias, mean and variance must be constants")
            return
        scale, bias, mean, var = values
        a = scale / np.sqrt(var + float(node.attr("epsilon", 1e-5)))
        self._emit("QAffine", node, [x[0]], out[0], a=a, b=bias - mean * a, x=x[1], y=out[1],
                   clip=out[2])

    def constant(self, name: str) -> np.ndarray | None:
        """A float constant: the model's, or a quantized one dequantized (float64)."""
        if name in self.weights:
            w = self.weights[name]
            shape = [1] * w.q.ndim
            if w.scale.size > 1:
                shape[w.axis] = -1
            return (w.q.astype(np.float64) - w.zero_point.reshape(shape)) * \
                w.scale.astype(np.float64).reshape(shape)
        if name in self.g.consts:
            return np.asarray(self.g.consts[name], dtype=np.float64)
        return None

    def _hard_sigmoid(self, node: Node) -> None:
        """HardSigmoid = clip(αx + β, 0, 1): an affine map with a clamp (4-D tensors)."""
        got = self._operands(node, 1)
        if got is None:
            return
        x, out = got
        shape = self.shapes.get(node.inputs[0]) or self.g.shapes[node.inputs[0]]
        if len(shape) != 4:
            self.fail(node, f"a quantized HardSigmoid needs a [N, C, H, W] input (got rank "
                            f"{len(shape)})")
            return
        C = shape[1]
        lo, hi = self.bounds(0.0, 1.0, out[1]) or (self.dt.min_raw, self.dt.max_raw)
        if out[2] is not None:
            lo, hi = max(lo, out[2][0]), min(hi, out[2][1])
        self._emit("QAffine", node, [x[0]], out[0],
                   a=np.full(C, float(node.attr("alpha", 0.2))),
                   b=np.full(C, float(node.attr("beta", 0.5))), x=x[1], y=out[1],
                   clip=(lo, hi))

    def _leaky(self, node: Node) -> None:
        """LeakyRelu with -1 < alpha < 2 (its slopes fit the lane multipliers)."""
        alpha = float(node.attr("alpha", 0.01))
        if not -1 < alpha < 2:
            self.fail(node, f"alpha {alpha}: the integer LeakyRelu takes -1 < alpha < 2 (its "
                            f"slopes are W + 9-bit multipliers)")
            return
        got = self._operands(node, 1)
        if got is not None:
            x, out = got
            self._emit("QLeakyRelu", node, [x[0]], out[0], alpha=float(node.attr("alpha", 0.01)),
                       x=x[1], y=out[1], clip=out[2])

    def _clamp(self, node: Node) -> None:
        """A Relu or Clip of its own: a rescale to the output's quantization, clamped."""
        got = self._operands(node, 1, fuse=False)
        if got is not None:
            x, out = got
            self._emit("QRescale", node, [x[0]], out[0], x=x[1], y=out[1],
                       clip=self.clip_of(node, out[1]))

    def _view(self, node: Node) -> None:
        """An operator that only moves values; an input quantized otherwise than the output
        is first rescaled to it (onnxruntime's Concat of differently quantized branches)."""
        g = self.g
        outs, py = [], None
        for o in node.outputs:
            users = g.consumers(o) if o else []
            if o and len(users) == 1 and users[0].op == "QuantizeLinear" and \
                    o not in g.outputs:
                got = self.output(node, o, fuse=False)
                if got is None:
                    return
                if got[2] is not None or (py is not None and not py.same(got[1])):
                    self.fail(node, "its outputs need one quantization")
                    return
                outs.append(got[0])
                py = got[1]
            else:
                outs.append(o)
        ins = []
        for i in node.inputs:
            if not i or g.is_const(i):
                ins.append(i)
                continue
            got = self.activation(node, i)
            if got is None:
                return
            name, px = got
            if py is not None and not px.same(py):
                name = f"{name}:as:{outs[0]}"
                self._emit("QRescale", node, [got[0]], name, x=px, y=py, clip=None)
                self.shapes[name] = self.shapes.get(i) or g.shapes[i]
            ins.append(name)
            py = py or px
        for k, o in enumerate(node.outputs):    # operator form: integer in, integer out
            if o and outs[k] == o and o not in self.params:
                self.params[o] = py
        if py is None:
            self.fail(node, "has no quantized input")
            return
        self.nodes.append(replace(node, inputs=ins, outputs=outs))


def _affine_chain(conv: _Converter, chain: list[Node]) -> tuple[float, float] | None:
    """``(a, b)`` with the chain of functions ``x ↦ a·x + b`` when every step is Neg or
    arithmetic with a scalar constant that keeps it affine (not ``c / x``, not Pow); else
    None."""
    a, b = 1.0, 0.0
    for node in chain:
        if node.op == "Neg":
            a, b = -a, -b
            continue
        if node.op not in ("Add", "Sub", "Mul", "Div"):
            return None
        first = conv.constant(node.inputs[0])
        c = float((first if first is not None else conv.constant(node.inputs[1]))
                  .reshape(-1)[0])
        if node.op == "Add":
            b += c
        elif node.op == "Sub":
            a, b = (-a, c - b) if first is not None else (a, b - c)
        elif node.op == "Mul":
            a, b = a * c, b * c
        elif first is not None or c == 0:
            return None
        else:
            a, b = a / c, b / c
    return a, b


def _const_or(g: Graph, names, default: float) -> float:
    """The scalar constant ``names[0]`` names, or ``default`` when there is none."""
    if names and names[0] and names[0] in g.consts:
        return float(np.asarray(g.consts[names[0]]).reshape(-1)[0])
    return default


def integer_graph(g: Graph, dt) -> Graph:
    """The integer graph of quantized model ``g`` for integer data type ``dt`` (module
    docstring); one :class:`CompileError` lists every node it cannot take."""
    return _Converter(g, dt).run()
