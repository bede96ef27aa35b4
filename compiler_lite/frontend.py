"""ONNX front end: load, bring to a supported opset, fix input shapes, infer shapes, fold
constants, select outputs and prune.

The result is a :class:`Graph` of plain Python :class:`Node` objects with every value's static
shape, every constant as a numpy array, and only the nodes the requested outputs need, in
topological order. What the graph computes is unchanged: the only rewrite is constant folding
(any node whose inputs are all known is evaluated with ONNX's reference implementation, which
also turns shape sub-graphs such as ``Shape → Gather → Concat → Reshape`` into constants).

Opsets older than :data:`MIN_OPSET` are converted with ``onnx.version_converter``. Its
``Resize``-10 → 11 adapter drops the opset-10 coordinate rule (asymmetric, nearest rounds
down), so the front end writes that rule back onto the converted node: the model keeps the
semantics it was exported with (``resize_mode='tensil'`` asks for Tensil's half-pixel rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tcu_hw.errors import CompileError
from tcu_hw.numeric import nonfinite

#: Models with an older default-domain opset are converted to this one first.
MIN_OPSET = 13


@dataclass
class Node:
    """One ONNX node with decoded attributes (tensors as numpy arrays, strings as str)."""

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict
    domain: str = ""

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    @property
    def label(self) -> str:
        return f"node '{self.name}' ({self.op})"


@dataclass
class Graph:
    """A model ready for lowering: static shapes, constants folded, pruned to the outputs."""

    source: str
    opset: int
    nodes: list[Node]
    consts: dict[str, np.ndarray]
    shapes: dict[str, tuple[int, ...]]
    inputs: list[str]
    outputs: list[str]
    notes: list[str] = field(default_factory=list)
    #: Resize node output → the scales the model gave (its sizes were made explicit).
    resize_scales: dict = field(default_factory=dict)
    #: dynamic input dimensions that were given a value no one asked for (the batch: 1)
    assumed_dims: list[str] = field(default_factory=list)
    #: a quantized model's inputs and outputs: name → (scale, zero point) (quant.QParams)
    io_quant: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._consumers: dict[str, list[Node]] = {}
        self._producer: dict[str, Node] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    self._consumers.setdefault(name, []).append(node)
            for name in node.outputs:
                self._producer[name] = node

    def consumers(self, name: str) -> list[Node]:
        return self._consumers.get(name, [])

    def producer(self, name: str) -> Node | None:
        return self._producer.get(name)

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def shape(self, name: str) -> tuple[int, ...]:
        try:
            return self.shapes[name]
        except KeyError:
            raise CompileError(f"{self.source}: the shape of tensor '{name}' is unknown after "
                               f"shape inference") from None


# --------------------------------------------------------------------------- input shapes

def parse_input_shapes(text: str | Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """``--input-shapes "name [d0,d1,…]"`` (several separated by ``;``, or a list) →
    {name: dims}."""
    if not text:
        return {}
    items = [text] if isinstance(text, str) else list(text)
    out = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(";"))):
            m = re.fullmatch(r"(.+?)\s*\[\s*([-+0-9,\s]*)\]", part)
            if not m:
                raise CompileError(f"-i {part!r}: expected 'NAME [d0,d1,...]', e.g. "
                                   f"'x [1,3,32,32]'")
            dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
            if not all(d.isdigit() and int(d) > 0 for d in dims):
                raise CompileError(f"-i {part!r}: dimensions must be positive integers")
            out[m.group(1).strip()] = tuple(int(d) for d in dims)
    return out


# --------------------------------------------------------------------------------- loading

def load_model(model, source: str):
    """A ModelProto from a path (or the ModelProto itself); CompileError naming the file
    when it cannot be read."""
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.is_file():
        raise CompileError(f"{path}: no such ONNX model file")
    try:
        m = onnx.load(str(path))
    except Exception as e:  # noqa: BLE001 - protobuf raises many kinds
        raise CompileError(f"{path}: cannot read ONNX model: {e}") from None
    if not m.HasField("graph") or not m.graph.node:
        raise CompileError(f"{path}: empty or not an ONNX model (it has no graph nodes)")
    return m


def _default_opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def convert_opset(model, source: str):
    """Bring an old model to :data:`MIN_OPSET`; restore opset-10 Resize semantics."""
    import onnx
    from onnx import version_converter
    opset = _default_opset(model)
    if opset >= MIN_OPSET:
        return model, opset, []
    old_resize = {n.output[0] for n in model.graph.node if n.op_type in ("Resize", "Upsample")}
    try:
        converted = version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:  # noqa: BLE001
        raise CompileError(f"{source}: cannot convert opset {opset} to {MIN_OPSET} with "
                           f"onnx.version_converter: {str(e).strip().splitlines()[0]}") from None
    notes = []
    if old_resize and opset < 11:
        for node in converted.graph.node:
            if node.op_type == "Resize" and node.output[0] in old_resize:
                keep = [a for a in node.attribute
                        if a.name not in ("coordinate_transformation_mode", "nearest_mode")]
                del node.attribute[:]
                node.attribute.extend(keep)
                node.attribute.extend([
                    onnx.helper.make_attribute("coordinate_transformation_mode", "asymmetric"),
                    onnx.helper.make_attribute("nearest_mode", "floor")])
        notes.append(f"opset {opset} Resize/Upsample keep their asymmetric coordinates")
    return converted, opset, notes


def _attr_value(a):
    import onnx
    from onnx import numpy_helper
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8", "replace") for x in v]
    if isinstance(v, onnx.GraphProto):
        return v
    return v


def _set_input_shapes(model, given: Mapping[str, tuple], source: str
                      ) -> tuple[list[str], list[str]]:
    """Fix every graph input's dims (batch defaults to 1); returns the real input names and
    one sentence per dimension set without ``-i`` (which, from what, to what)."""
    inits = {t.name for t in model.graph.initializer}
    real = [i for i in model.graph.input if i.name not in inits]
    names = [i.name for i in real]
    unknown = [k for k in given if k not in names]
    if unknown:
        raise CompileError(f"{source}: --input-shapes names {', '.join(map(repr, unknown))}, "
                           f"which {'is' if len(unknown) == 1 else 'are'} not a model input; "
                           f"inputs: "
                           + ", ".join(names))
    assumed = []
    for vi in real:
        tt = vi.type.tensor_type
        dims = tt.shape.dim
        want = given.get(vi.name)
        if want is not None:
            if len(want) != len(dims):
                raise CompileError(f"{source}: --input-shapes gives input '{vi.name}' "
                                   f"{len(want)} dimensions, the model has {len(dims)}")
            for k, (d, w) in enumerate(zip(dims, want)):
                if k > 0 and d.HasField("dim_value") and d.dim_value not in (0, w):
                    raise CompileError(
                        f"{source}: --input-shapes gives input '{vi.name}' dimension {k} = "
                        f"{w}, the model fixes it to {d.dim_value}")
        for k, d in enumerate(dims):
            if want is not None:
                value = want[k]
            elif d.HasField("dim_value") and d.dim_value > 0:
                continue
            elif k == 0:
                value = 1
                was = repr(d.dim_param) if d.dim_param else "unknown"
                assumed.append(f"input '{vi.name}' dimension 0 ({was}) set to 1; give another "
                               f"with --input-shapes '{vi.name} [d0,d1,...]'")
            else:
                raise CompileError(
                    f"{source}: input '{vi.name}' dimension {k} is dynamic "
                    f"({d.dim_param or '?'}); give the shape with --input-shapes "
                    f"'{vi.name} [d0,d1,...]'")
            d.Clear()
            d.dim_value = value
    return names, assumed


def _resize_sizes(model) -> dict:
    """Give every ``Resize`` with constant scales explicit output sizes.

    ONNX says ``floor(d·scale)`` but exporters write scales such as 0.2580645 for 124 → 32
    (124 × 0.2580645 = 31.99999) and onnxruntime keeps 32. A product within 1e-3 of an integer
    is taken as that integer. Returns {node output: the original scales} (the lowering maps
    coordinates with the scales, as onnxruntime does).
    """
    from onnx import numpy_helper, shape_inference
    resizes = [n for n in model.graph.node if n.op_type == "Resize" and len(n.input) >= 3
               and n.input[2] and (len(n.input) < 4 or not n.input[3])]
    if not resizes:
        return {}
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    try:
        shapes = _static_shapes(shape_inference.infer_shapes(model, data_prop=True))
    except Exception:  # noqa: BLE001 - the strict pass reports it
        return {}
    shapes.update({i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim)
                   for i in model.graph.input})
    scales = {}
    for k, node in enumerate(resizes):
        s, shape = consts.get(node.input[2]), shapes.get(node.input[0])
        if s is None or shape is None or s.size != len(shape) or not s.size:
            continue
        exact = np.asarray(shape, dtype=np.float64) * s.astype(np.float64)
        near = np.round(exact)
        sizes = np.where(np.abs(exact - near) < 1e-3, near, np.floor(exact)).astype(np.int64)
        name = f"{node.output[0]}__sizes"
        model.graph.initializer.append(numpy_helper.from_array(sizes, name))
        del node.input[2:]
        node.input.extend(["", name])
        scales[node.output[0]] = s.astype(np.float64)
    return scales


def _infer(model, source: str):
    from onnx import shape_inference
    try:
        return shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                            data_prop=True)
    except Exception as e:  # noqa: BLE001
        raise CompileError(f"{source}: ONNX shape inference failed: "
                           f"{str(e).strip().splitlines()[-1]}") from None


def _static_shapes(model) -> dict:
    shapes = {}
    for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if all(d is not None for d in dims):
            shapes[vi.name] = tuple(int(d) for d in dims)
    return shapes


def _eval_node(proto, values: dict, opset: int):
    """Run one node with ONNX's reference implementation on known inputs."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    ins = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(values[name].dtype),
                                         values[name].shape) for name in proto.input if name]
    outs = [helper.make_value_info(name, helper.TypeProto()) for name in proto.output]
    g = helper.make_graph([proto], "fold", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    res = ReferenceEvaluator(m).run(None, {k: values[k] for k in proto.input if k})
    return [np.asarray(r) for r in res]


def _fuse_swish(nodes: list[Node], outputs) -> list[Node]:
    """``Mul(x, Sigmoid(x))`` (SiLU as exporters write it) → one ``Swish`` node: one table
    lookup instead of a lookup, a copy and a product."""
    users: dict[str, list[Node]] = {}
    for n in nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n)
    drop, out = set(), []
    by_out = {o: n for n in nodes for o in n.outputs}
    for n in nodes:
        if n.op == "Mul" and len(n.inputs) == 2:
            for x, s in (n.inputs, n.inputs[::-1]):
                sig = by_out.get(s)
                if sig is not None and sig.op == "Sigmoid" and sig.inputs[0] == x and \
                        len(users.get(s, [])) == 1 and s not in outputs:
                    drop.add(id(sig))
                    n = Node("Swish", n.name, [x], n.outputs, {"alpha": 1.0}, n.domain)
                    break
        out.append(n)
    return [n for n in out if id(n) not in drop]


def _fuse_rsqrt(nodes: list[Node], consts: dict, outputs) -> list[Node]:
    """``Div(a, Sqrt(v))`` (LayerNorm as PyTorch exports it) → ``Mul(a, Pow(v, -0.5))``: one
    inverse-square-root table instead of a square-root table and a reciprocal table."""
    users: dict[str, int] = {}
    for n in nodes:
        for i in n.inputs:
            users[i] = users.get(i, 0) + 1
    by_out = {o: n for n in nodes for o in n.outputs}
    out, drop = [], set()
    for n in nodes:
        sq = by_out.get(n.inputs[1]) if n.op == "Div" and len(n.inputs) == 2 else None
        if sq is not None and sq.op == "Sqrt" and users.get(sq.outputs[0]) == 1 and \
                sq.outputs[0] not in outputs:
            half = f"{sq.name}:-0.5"
            consts[half] = np.array(-0.5, dtype=np.float32)
            drop.add(id(sq))
            out.append(Node("Pow", sq.name, [sq.inputs[0], half], sq.outputs, {}, sq.domain))
            n = Node("Mul", n.name, list(n.inputs), n.outputs, {}, n.domain)
        out.append(n)
    return [n for n in out if id(n) not in drop]       # the Pow sits just before its Div


def layer_norm_supported(rank: int, axis: int) -> bool:
    """Whether a LayerNormalization over the axes from ``axis`` (≥ 0) on is one the compiler
    decomposes: its means keep the batch axis and one other (see ReduceMean)."""
    return (rank == 2 and axis == 1) or (rank in (3, 4) and axis == 2)


def _decompose_layer_norm(nodes: list[Node], consts: dict, shapes: dict) -> list[Node]:
    """The opset-17 ``LayerNormalization`` → the primitive ops exporters write for it:
    ``xc = X − mean(X)``, ``Y = xc · (mean(xc²) + ε)^-½ · Scale + B`` over the axes from
    ``axis`` on (one lookup table for the inverse square root); the first mean is marked as
    over features (``features=1``: see :func:`.ops.linear.reduce_mean`), the Scale's Mul as
    reading a normalized tensor (``normalized=1``: see :mod:`.prescale`). Its optional Mean and
    InvStdDev outputs are the intermediate tensors. A quantized one (its input comes from a
    DequantizeLinear) stays whole: the integer path lowers it as it is."""
    out = []
    made = {o: n for n in nodes for o in n.outputs}
    for n in nodes:
        if n.op != "LayerNormalization" or n.domain not in ("", "ai.onnx") or \
                getattr(made.get(n.inputs[0]), "op", None) == "DequantizeLinear":
            out.append(n)
            continue
        x, scale = n.inputs[0], n.inputs[1]
        bias = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
        shape = shapes.get(x)
        if shape is None:
            out.append(n)
            continue
        rank = len(shape)
        axis = int(n.attr("axis", -1)) % rank
        if not layer_norm_supported(rank, axis):
            out.append(n)                       # the whole-graph check says why
            continue
        axes = list(range(axis, rank))
        red = tuple(1 if a in axes else d for a, d in enumerate(shape))
        outs = list(n.outputs) + [""] * (3 - len(n.outputs))
        k = f"{n.name}:"
        mean, rstd = outs[1] or k + "mean", outs[2] or k + "rstd"
        names = {"xc": k + "centred", "sq": k + "square", "var": k + "variance",
                 "ve": k + "variance+eps", "xn": k + "normalized", "xs": k + "scaled"}
        consts[k + "two"] = np.array(2.0, dtype=np.float32)
        consts[k + "eps"] = np.array(float(n.attr("epsilon", 1e-5)), dtype=np.float32)
        consts[k + "-half"] = np.array(-0.5, dtype=np.float32)
        for t, sh in ((mean, red), (rstd, red), (names["xc"], shape), (names["sq"], shape),
                      (names["var"], red), (names["ve"], red), (names["xn"], shape),
                      (names["xs"], shape)):
            shapes[t] = sh
        y = outs[0]
        scaled = names["xs"] if bias else y

        def node(op, ins, o, **attrs):
            return Node(op, f"{n.name}:{op.lower()}:{len(out)}", ins, [o], attrs, n.domain)

        # (features: the lowering moves X's reduced axes into the lanes first if they are not)
        out += [node("ReduceMean", [x], mean, axes=axes, keepdims=1, features=1),
                node("Sub", [x, mean], names["xc"]),
                node("Pow", [names["xc"], k + "two"], names["sq"]),
                node("ReduceMean", [names["sq"]], names["var"], axes=axes, keepdims=1),
                node("Add", [names["var"], k + "eps"], names["ve"]),
                node("Pow", [names["ve"], k + "-half"], rstd),
                node("Mul", [names["xc"], rstd], names["xn"]),
                node("Mul", [names["xn"], scale], scaled, normalized=1)]
        if bias:
            out.append(node("Add", [scaled, bias], y))
    return out


def _fold_pads(nodes: list[Node], consts: dict, shapes: dict, outputs) -> list[Node]:
    """A zero ``Pad`` of the spatial axes feeding only Conv nodes becomes their padding."""
    users: dict[str, list[Node]] = {}
    for n in nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n)
    drop = set()
    for n in nodes:
        if n.op != "Pad" or n.outputs[0] in outputs or n.attr("mode", "constant") != "constant":
            continue
        convs = users.get(n.outputs[0], [])
        if not convs or any(c.op != "Conv" or c.inputs[0] != n.outputs[0] for c in convs):
            continue
        rank = len(shapes.get(n.inputs[0], ()))
        if rank not in (3, 4):
            continue
        pads = consts.get(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else n.attr("pads")
        value = consts.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else \
            n.attr("value", 0.0)
        axes = consts.get(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] else None
        if pads is None or value is None or (np.asarray(value).size and
                                             float(np.asarray(value).reshape(-1)[0]) != 0.0):
            continue
        pads = [int(p) for p in np.ravel(pads)]
        axes = list(range(rank)) if axes is None else [int(a) % rank for a in np.ravel(axes)]
        full = [0] * (2 * rank)
        for j, a in enumerate(axes):
            full[a], full[a + rank] = pads[j], pads[j + len(axes)]
        if any(p < 0 for p in full) or full[0] or full[1] or full[rank] or full[rank + 1]:
            continue
        extra = full[2:rank] + full[rank + 2:]
        ok = all(c.attr("auto_pad", "NOTSET") in ("NOTSET", "") for c in convs)
        if not ok:
            continue
        for c in convs:
            dims = rank - 2
            old = list(c.attr("pads", [0] * 2 * dims) or [0] * 2 * dims)
            c.attrs["pads"] = [a + b for a, b in zip(old, extra)]
            c.inputs[0] = n.inputs[0]
        drop.add(id(n))
    return [n for n in nodes if id(n) not in drop]


def load_graph(model, input_shapes: Mapping[str, tuple] | None = None,
               outputs: Sequence[str] | None = None, source: str | None = None,
               keep_dequantize: bool = False) -> Graph:
    """Load and normalize a model (path or ``onnx.ModelProto``); see the module docstring.
    ``keep_dequantize``: leave ``DequantizeLinear`` of constants unfolded (the integer path,
    :mod:`compiler_lite.quant`, reads the integer weights and their scales from them)."""
    import onnx
    from onnx import numpy_helper
    source = source or (str(model) if not isinstance(model, onnx.ModelProto) else "model")
    m = load_model(model, source)
    m, original_opset, notes = convert_opset(m, source)
    opset = max(_default_opset(m), MIN_OPSET)
    m = onnx.ModelProto.FromString(m.SerializeToString())        # never modify the caller's
    inputs, assumed = _set_input_shapes(m, dict(input_shapes or {}), source)
    del m.graph.value_info[:]                   # stale annotations; inference redoes them
    for o in m.graph.output:                    # (a new batch size changes the outputs too)
        o.type.tensor_type.ClearField("shape")
    resize_scales = _resize_sizes(m)
    m = _infer(m, source)
    shapes = _static_shapes(m)

    consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts.setdefault(n.output[0], numpy_helper.to_array(n.attribute[0].t))
    for name, value in consts.items():
        bad = nonfinite(value)
        if bad:
            raise CompileError(f"{source}: parameter tensor '{name}' holds {bad}; the TCU "
                               f"computes on finite numbers (fix the model's weights)")
    for name in inputs:
        elem = next(i for i in m.graph.input if i.name == name).type.tensor_type.elem_type
        if elem not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                        onnx.TensorProto.DOUBLE):
            raise CompileError(f"{source}: input '{name}' has element type "
                               f"{onnx.TensorProto.DataType.Name(elem)}; the TCU computes on "
                               f"real numbers (float inputs only)")

    nodes = []
    for k, proto in enumerate(m.graph.node):
        name = proto.name or f"{proto.op_type}_{k}"
        node = Node(proto.op_type, name, list(proto.input), list(proto.output),
                    {a.name: _attr_value(a) for a in proto.attribute}, proto.domain)
        known = [i for i in proto.input if i]
        foldable = node.domain in ("", "ai.onnx") and all(i in consts for i in known) and \
            node.op not in ("RandomNormal", "RandomUniform", "RandomNormalLike",
                            "RandomUniformLike", "Multinomial") and \
            not (keep_dequantize and node.op == "DequantizeLinear")
        if node.op == "Shape" and known and known[0] in shapes and known[0] not in consts:
            start, end = node.attr("start", 0), node.attr("end", None)
            consts[node.outputs[0]] = np.array(shapes[known[0]][start:end], dtype=np.int64)
            continue
        if node.op == "Size" and known and known[0] in shapes:
            consts[node.outputs[0]] = np.array(int(np.prod(shapes[known[0]])), dtype=np.int64)
            continue
        if foldable:
            try:
                results = _eval_node(proto, consts, opset)
            except Exception as e:  # noqa: BLE001
                raise CompileError(f"{source}: {node.label}: cannot evaluate constant node: "
                                   f"{str(e).strip().splitlines()[-1]}") from None
            for out, value in zip(proto.output, results):
                if out:
                    consts[out] = value
                    shapes[out] = tuple(value.shape)
            continue
        nodes.append(node)

    graph_outputs = [o.name for o in m.graph.output]
    chosen = list(outputs) if outputs else graph_outputs
    produced = {o for n in nodes for o in n.outputs if o}
    valid = [*inputs, *(o for n in nodes for o in n.outputs if o)]
    missing = [o for o in chosen if o not in produced and o not in inputs]
    if missing:
        hint = ", ".join(valid[:60]) + (" …" if len(valid) > 60 else "")
        raise CompileError(f"{source}: output {', '.join(map(repr, missing))} "
                           f"{'is' if len(missing) == 1 else 'are'} not a tensor computed by "
                           f"the model; valid names: {hint}")
    if len(set(chosen)) != len(chosen):
        raise CompileError(f"{source}: an output is named twice in {chosen}")

    needed, keep = set(chosen), []
    for node in reversed(nodes):
        if any(o in needed for o in node.outputs):
            keep.append(node)
            needed.update(i for i in node.inputs if i)
    keep.reverse()
    keep = _fuse_swish(keep, chosen)
    keep = _decompose_layer_norm(keep, consts, shapes)
    keep = _fuse_rsqrt(keep, consts, chosen)
    keep = _fold_pads(keep, consts, shapes, chosen)
    used_inputs = [i for i in inputs if i in needed]
    if original_opset < MIN_OPSET:
        notes.insert(0, f"converted from opset {original_opset} to {MIN_OPSET}")
    g = Graph(source, opset, keep, consts, shapes, used_inputs, chosen, assumed + notes)
    g.resize_scales = resize_scales
    g.assumed_dims = assumed
    return g
