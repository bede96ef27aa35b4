"""Artifact files (TCU.md §5): `.tmodel`, `.tdata`, emulator CSV, `architecture_params.h`.

`.tprog` reading and writing is in :mod:`tcu_hw.isa` (it needs the instruction layout). Every
reader checks what it reads and raises :class:`~tcu_hw.errors.ArtifactError` naming the file,
the key or line, and what was expected.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import numeric
from .arch import Architecture, ArchSpec, arch_stem
from .errors import ArchitectureError, ArtifactError
from .files import read_bytes, read_json, read_text, write_atomic


# ------------------------------------------------------------------------------------ names

def model_name(model_file, arch: ArchSpec) -> str:
    """Tensil's model name: the model file name with every character outside ``[A-Za-z0-9 :]``
    replaced by ``_``, then ``_`` and the `.tarch` stem (or preset name).

    ``model_name("resnet20v2_cifar.onnx", "pynqz1.tarch") == "resnet20v2_cifar_onnx_pynqz1"``
    """
    return re.sub(r"[^A-Za-z0-9 :]", "_", Path(model_file).name) + "_" + arch_stem(arch)


# ----------------------------------------------------------------------------- I/O layout

@dataclass(frozen=True)
class Unfold:
    """An input the host lays out unfolded (docs/tensil.md, "Unfolded inputs"): the first
    convolution's kernel taps along the width (and the height, when ``kernel[0] > 1``) moved
    into the channels, so that the program's convolution reads ``kernel`` taps in one vector.

    ``perm``: the model input's axes in (N, C, H, W) order (identity for an NCHW input; a
    channels-last input reaches its convolution through a Transpose). With ``x`` = the input
    so transposed, the stored tensor is (N, K·C, Ho, Wo), K = kernel[0]·kernel[1]::

        u[n, (kh·kernel[1] + kw)·C + c, i, j] =
            x[n, c, i·strides[0] + kh·dilations[0] − pads[0],
                    j·strides[1] + kw·dilations[1] − pads[1]]      (0 outside x)
    """

    perm: tuple
    kernel: tuple
    strides: tuple
    dilations: tuple
    pads: tuple
    out: tuple

    def shape(self, source_shape) -> tuple:
        """The stored tensor's shape for a model input of ``source_shape``."""
        n, c = (source_shape[a] for a in self.perm[:2])
        return (n, self.kernel[0] * self.kernel[1] * c) + tuple(self.out)

    def apply(self, values) -> np.ndarray:
        """The model input (its own layout) → the stored tensor (N, K·C, Ho, Wo)."""
        x = np.transpose(np.asarray(values), self.perm)
        N, C, H, W = x.shape
        out = np.zeros((N, self.kernel[0], self.kernel[1], C) + tuple(self.out), x.dtype)
        for kh in range(self.kernel[0]):
            i = np.arange(self.out[0]) * self.strides[0] + kh * self.dilations[0] - self.pads[0]
            for kw in range(self.kernel[1]):
                j = np.arange(self.out[1]) * self.strides[1] + kw * self.dilations[1] \
                    - self.pads[1]
                rows, cols = np.ix_(np.flatnonzero((i >= 0) & (i < H)),
                                    np.flatnonzero((j >= 0) & (j < W)))
                out[:, kh, kw][:, :, rows, cols] = x[:, :, i[rows], j[cols]]
        return out.reshape(self.shape(np.shape(values)))

    def to_dict(self) -> dict:
        return {k: list(getattr(self, k)) for k in UNFOLD_KEYS}


UNFOLD_KEYS = ("perm", "kernel", "strides", "dilations", "pads", "out")


@dataclass(frozen=True)
class TensorLayout:
    """Where a model input or output sits in DRAM0 and how its elements map to vectors.

    ``order``: the tensor's axes from outermost to innermost as stored; the innermost axis is
    spread over the lanes (zero-padded to whole vectors). Compiled models write these to
    ``<name>.tio.json`` next to the `.tmodel` (not part of Tensil's files).

    ``scale``/``zero_point``: for a model compiled to an integer type (docs/integer.md), the
    quantization of the tensor: the host quantizes a float input with onnxruntime's
    QuantizeLinear and dequantizes an output with its DequantizeLinear (:meth:`encode`,
    :meth:`decode`). None for fixed-point types (Tensil's rule, :func:`numeric.to_fixed`).

    ``unfold``: an input stored unfolded (:class:`Unfold`): ``shape`` is still the model's,
    ``order`` applies to the unfolded tensor, and :meth:`to_vectors` unfolds first.
    """

    name: str
    shape: tuple
    order: tuple
    base: int
    vectors: int
    scale: float | None = None
    zero_point: int = 0
    unfold: Unfold | None = None

    def to_dict(self) -> dict:
        d = {"name": self.name, "shape": list(self.shape), "order": list(self.order),
             "base": self.base, "size": self.vectors}
        if self.scale is not None:
            d.update(scale=float(self.scale), zero_point=int(self.zero_point))
        if self.unfold is not None:
            d["unfold"] = self.unfold.to_dict()
        return d

    def encode(self, values, dt, n: int) -> tuple[np.ndarray, int]:
        """Model-layout floats → (raw vectors as in DRAM0, saturations): quantized when the
        tensor has a scale, else converted to fixed point. Padding lanes are raw 0."""
        vec = self.to_vectors(np.asarray(values, dtype=np.float64), n)
        if self.scale is None:
            return numeric.to_fixed(vec, dt)
        mask = self.to_vectors(np.ones(self.shape, dtype=bool), n)
        raw, saturations = numeric.quantize(vec, self.scale, self.zero_point, dt)
        return np.where(mask, raw, 0), saturations       # (padding lanes quantize 0: in range)

    def decode(self, raw, dt, n: int) -> np.ndarray:
        """Raw vectors → model-layout floats (dequantized when the tensor has a scale)."""
        if self.scale is None:
            return self.from_vectors(numeric.to_float(raw, dt), n)
        return self.from_vectors(numeric.dequantize(raw, self.scale, self.zero_point)
                                 .astype(np.float64), n)

    def to_vectors(self, values, n: int) -> np.ndarray:
        """Model-layout array → (vectors, n) in vector layout (padding lanes zero)."""
        a = np.asarray(values)
        if tuple(a.shape) != tuple(self.shape):
            raise ArtifactError(f"tensor '{self.name}': shape {list(a.shape)}, expected "
                                f"{list(self.shape)}")
        if self.unfold is not None:
            a = self.unfold.apply(a)
        t = np.transpose(a, self.order)
        inner = t.shape[-1] if t.ndim else 1
        rows = t.reshape(-1, inner)
        per = -(-inner // n)
        out = np.zeros((rows.shape[0], per * n), dtype=rows.dtype)
        out[:, :inner] = rows
        return out.reshape(-1, n)

    def from_vectors(self, vecs, n: int) -> np.ndarray:
        """(vectors, n) → model-layout array."""
        if self.unfold is not None:
            raise ArtifactError(f"tensor '{self.name}' is stored unfolded: it is written, "
                                f"not read back")
        tshape = [self.shape[a] for a in self.order]
        inner = tshape[-1] if tshape else 1
        per = -(-inner // n)
        rows = np.asarray(vecs).reshape(-1, per * n)[:, :inner]
        return np.transpose(rows.reshape(tshape), np.argsort(self.order))


def io_layout_json(arch: Architecture, inputs, outputs) -> str:
    return json.dumps({"array_size": arch.array_size, "data_type": arch.data_type,
                       "inputs": [t.to_dict() for t in inputs],
                       "outputs": [t.to_dict() for t in outputs]}, indent=1) + "\n"


def read_io_layout(path) -> tuple[list[TensorLayout], list[TensorLayout]]:
    """(inputs, outputs) of a ``.tio.json``."""
    d = read_json(path, "I/O layout (.tio.json)", ArtifactError)
    out = []
    try:
        for key in ("inputs", "outputs"):
            out.append([TensorLayout(e["name"], tuple(int(v) for v in e["shape"]),
                                     tuple(int(v) for v in e["order"]), int(e["base"]),
                                     int(e["size"]),
                                     float(e["scale"]) if "scale" in e else None,
                                     int(e.get("zero_point", 0)), _unfold(e))
                        for e in d[key]])
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"{path}: malformed I/O layout: {e}") from None
    for t in out[0] + out[1]:
        if sorted(t.order) != list(range(len(t.shape))):
            raise ArtifactError(f"{path}: tensor '{t.name}': order {list(t.order)} is not a "
                                f"permutation of its {len(t.shape)} axes")
    _check_unfolds(path, d, out[0], out[1])
    return out[0], out[1]


def _unfold(entry: dict) -> Unfold | None:
    u = entry.get("unfold")
    if u is None:
        return None
    if any(not isinstance(v, int) for k in UNFOLD_KEYS for v in u[k]):
        raise ValueError(f"tensor '{entry['name']}': unfold {u}: every value is an integer")
    unfold = Unfold(*(tuple(u[k]) for k in UNFOLD_KEYS))
    if sorted(unfold.perm) != [0, 1, 2, 3] or \
            any(len(getattr(unfold, k)) != 2 for k in UNFOLD_KEYS[1:]):
        raise ValueError(f"tensor '{entry['name']}': unfold {u}: perm must order 4 axes and "
                         f"the other keys hold 2 numbers each")
    if min(unfold.kernel + unfold.strides + unfold.dilations + unfold.out) < 1 or \
            min(unfold.pads) < 0 or len(entry["shape"]) != 4:
        raise ValueError(f"tensor '{entry['name']}': unfold {u}: a 4-D input, kernel, "
                         f"strides, dilations and out at least 1, pads at least 0")
    return unfold


def _check_unfolds(path, d: dict, inputs, outputs) -> None:
    """Unfolds only on inputs, each giving the vectors its ``size`` says."""
    for t in outputs:
        if t.unfold is not None:
            raise ArtifactError(f"{path}: output '{t.name}' has an unfold; only inputs do")
    n = int(d.get("array_size", 0))
    for t in inputs:
        if t.unfold is None or n < 1:
            continue
        stored = t.unfold.shape(t.shape)
        inner = stored[t.order[-1]]
        vectors = int(np.prod(stored)) // inner * -(-inner // n)
        if vectors != t.vectors:
            raise ArtifactError(f"{path}: input '{t.name}': unfolded to {list(stored)} it takes "
                                f"{vectors} vectors of {n} lanes, its size says {t.vectors}")


# ----------------------------------------------------------------------------------- tmodel

@dataclass(frozen=True)
class ProgEntry:
    file_name: str
    size: int                       # bytes


@dataclass(frozen=True)
class ConstsEntry:
    file_name: str
    base: int                       # vectors
    size: int                       # vectors


@dataclass(frozen=True)
class TensorEntry:
    """One contiguous run of DRAM0 vectors of a model input or output."""

    name: str
    base: int
    size: int


@dataclass(frozen=True)
class TModel:
    """A compiled model manifest.

    ``load_consts_to_local`` is None when the file has no such key (older Tensil releases);
    :attr:`consts_to_local` reads that as False. ``directory`` is where file names resolve.
    ``dram0_consts``: copies of constants the host also writes into DRAM0 (our extension,
    key ``dram0_consts``, written only when there are some: a program compiled with
    ``--consts-ports both`` splits its constants loads over both ports). ``dram1_inputs``:
    copies of inputs the host also writes into DRAM1, each input's vectors in a row from
    ``base`` (our extension, key ``dram1_inputs``, only when there are some: a program
    compiled with ``--input-ports both`` splits its input loads over both ports).
    """

    name: str
    prog: ProgEntry
    consts: tuple[ConstsEntry, ...]
    inputs: tuple[TensorEntry, ...]
    outputs: tuple[TensorEntry, ...]
    arch: Architecture
    load_consts_to_local: bool | None = False
    directory: Path = field(default=Path("."), compare=False)
    dram0_consts: tuple[ConstsEntry, ...] = ()
    dram1_inputs: tuple[TensorEntry, ...] = ()

    @property
    def consts_to_local(self) -> bool:
        return bool(self.load_consts_to_local)

    def path(self, file_name: str) -> Path:
        return self.directory / file_name

    @property
    def input_names(self) -> list[str]:
        """Input names in order of first appearance."""
        return list(dict.fromkeys(e.name for e in self.inputs))

    @property
    def output_names(self) -> list[str]:
        return list(dict.fromkeys(e.name for e in self.outputs))

    def entries(self, name: str, outputs: bool = False) -> list[TensorEntry]:
        """The DRAM0 runs of one input (or output), sorted by base."""
        group = self.outputs if outputs else self.inputs
        found = sorted((e for e in group if e.name == name), key=lambda e: e.base)
        if not found:
            kind = "output" if outputs else "input"
            names = self.output_names if outputs else self.input_names
            raise ArtifactError(f"model {self.name!r} has no {kind} named {name!r}; "
                                f"{kind}s: {', '.join(names)}")
        return found

    def vectors(self, name: str, outputs: bool = False) -> int:
        """Total vectors of one input or output (all its runs)."""
        return sum(e.size for e in self.entries(name, outputs))

    def to_dict(self) -> dict:
        d = {"name": self.name,
             "prog": {"file_name": self.prog.file_name, "size": self.prog.size},
             "consts": _consts_dicts(self.consts),
             "inputs": _tensor_dicts(self.inputs),
             "outputs": _tensor_dicts(self.outputs),
             "arch": self.arch.to_dict()}
        if self.load_consts_to_local is not None:
            d["load_consts_to_local"] = bool(self.load_consts_to_local)
        if self.dram0_consts:
            d["dram0_consts"] = _consts_dicts(self.dram0_consts)
        if self.dram1_inputs:
            d["dram1_inputs"] = _tensor_dicts(self.dram1_inputs)
        return d

    def to_json(self) -> str:
        """Compact JSON with the keys in Tensil's order."""
        return json.dumps(self.to_dict(), separators=(",", ":"))


def _consts_dicts(entries) -> list[dict]:
    return [{"file_name": c.file_name, "base": c.base, "size": c.size} for c in entries]


class _Reader:
    """Typed access to a JSON object with errors that name the file and the key path."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, message: str):
        raise ArtifactError(f"{self.source}: {where}: {message}")

    def get(self, obj: dict, key: str, kind, where: str):
        path = f"{where}.{key}" if where else key
        if not isinstance(obj, dict):
            self.fail(where or "top level", f"expected a JSON object, got {json.dumps(obj)[:40]}")
        if key not in obj:
            self.fail(path, "missing key")
        v = obj[key]
        if kind is int:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                self.fail(path, f"expected a non-negative integer, got {json.dumps(v)}")
        elif kind is str:
            if not isinstance(v, str) or not v:
                self.fail(path, f"expected a non-empty string, got {json.dumps(v)}")
        elif kind is list:
            if not isinstance(v, list):
                self.fail(path, f"expected a list, got {json.dumps(v)[:40]}")
        elif kind is bool:
            if not isinstance(v, bool):
                self.fail(path, f"expected true or false, got {json.dumps(v)}")
        return v


TMODEL_KEYS = ("name", "prog", "consts", "inputs", "outputs", "arch", "load_consts_to_local",
               "dram0_consts", "dram1_inputs")


def tmodel_from_dict(d: dict, source: str = "tmodel", directory: Path = Path(".")) -> TModel:
    """Build a TModel from its JSON object, checking every key and type."""
    r = _Reader(source)
    if not isinstance(d, dict):
        r.fail("top level", "a .tmodel must be a JSON object")
    unknown = [k for k in d if k not in TMODEL_KEYS]
    if unknown:
        r.fail(unknown[0], f"unknown key; allowed: {', '.join(TMODEL_KEYS)}")
    name = r.get(d, "name", str, "")
    p = r.get(d, "prog", dict, "")
    prog = ProgEntry(r.get(p, "file_name", str, "prog"), r.get(p, "size", int, "prog"))
    consts = _consts_entries(r, d, "consts")
    dram0_consts = _consts_entries(r, d, "dram0_consts") if "dram0_consts" in d else ()
    tensors = {group: _tensor_entries(r, d, group) for group in ("inputs", "outputs")}
    dram1_inputs = _tensor_entries(r, d, "dram1_inputs") if "dram1_inputs" in d else ()
    try:
        arch = Architecture.from_dict(r.get(d, "arch", dict, ""), source=f"{source}: arch")
    except ArchitectureError as e:
        raise ArtifactError(str(e)) from None
    lctl = r.get(d, "load_consts_to_local", bool, "") if "load_consts_to_local" in d else None
    return TModel(name, prog, consts, tensors["inputs"], tensors["outputs"], arch, lctl,
                  Path(directory), dram0_consts, dram1_inputs)


def _tensor_entries(r: _Reader, d: dict, key: str) -> tuple[TensorEntry, ...]:
    return tuple(TensorEntry(r.get(e, "name", str, f"{key}[{i}]"),
                             r.get(e, "base", int, f"{key}[{i}]"),
                             r.get(e, "size", int, f"{key}[{i}]"))
                 for i, e in enumerate(r.get(d, key, list, "")))


def _tensor_dicts(entries) -> list[dict]:
    return [{"name": e.name, "base": e.base, "size": e.size} for e in entries]


def _consts_entries(r: _Reader, d: dict, key: str) -> tuple[ConstsEntry, ...]:
    return tuple(ConstsEntry(r.get(c, "file_name", str, f"{key}[{i}]"),
                             r.get(c, "base", int, f"{key}[{i}]"),
                             r.get(c, "size", int, f"{key}[{i}]"))
                 for i, c in enumerate(r.get(d, key, list, "")))


def check_tmodel(model: TModel, source: str = "tmodel") -> None:
    """Check the files a model points to exist and agree with it and with its architecture."""
    arch = model.arch
    layout = arch.layout

    def file(name: str, what: str) -> Path:
        path = model.path(name)
        if not path.is_file():
            raise ArtifactError(f"{source}: {what} file {name!r} not found (looked for {path})")
        return path

    prog = file(model.prog.file_name, "prog")
    size = prog.stat().st_size
    if size != model.prog.size:
        raise ArtifactError(f"{source}: prog.size is {model.prog.size} bytes but "
                            f"{model.prog.file_name} has {size}")
    if size % layout.instruction_bytes:
        raise ArtifactError(f"{source}: program {model.prog.file_name} has {size} bytes, not a "
                            f"multiple of the {layout.instruction_bytes}-byte instructions of "
                            f"its architecture")
    if model.dram0_consts and model.consts_to_local:
        raise ArtifactError(f"{source}: dram0_consts: copies of constants in DRAM0 are for "
                            f"programs that load constants from DRAM; this model has "
                            f"load_consts_to_local true")
    depth = arch.local_depth if model.consts_to_local else arch.dram1_depth
    where = "local memory" if model.consts_to_local else "DRAM1"
    _check_consts(model, "consts", depth, where, file, source)
    _check_consts(model, "dram0_consts", arch.dram0_depth - 2, "DRAM0 (less the two "
                  "flush-probe vectors)", file, source)
    tensors = [(f"{group}[{i}] {e.name!r}", e) for group in ("inputs", "outputs")
               for i, e in enumerate(getattr(model, group))]
    for what, e in tensors:
        if e.base + e.size > arch.dram0_depth:
            raise ArtifactError(f"{source}: {what} (base {e.base}, {e.size} vectors) does "
                                f"not fit DRAM0 ({arch.dram0_depth} vectors)")
        for i, c in enumerate(model.dram0_consts):
            if e.base < c.base + c.size and c.base < e.base + e.size:
                raise ArtifactError(f"{source}: {what} (vectors {e.base}..{e.base + e.size - 1}"
                                    f") overlaps dram0_consts[{i}] (vectors {c.base}.."
                                    f"{c.base + c.size - 1})")
    _check_input_copies(model, source)


def _check_input_copies(model: TModel, source: str) -> None:
    """Each ``dram1_inputs`` entry: a copy of a whole input, once, inside DRAM1, clear of
    the constants (hosts stage them in DRAM1 also for ``load_consts_to_local``) and of the
    other copies."""
    taken = [(f"consts[{i}]", c.base, c.size) for i, c in enumerate(model.consts)]
    seen = set()
    for i, e in enumerate(model.dram1_inputs):
        what = f"dram1_inputs[{i}] {e.name!r}"
        if e.name not in model.input_names:
            raise ArtifactError(f"{source}: {what}: no such input; inputs: "
                                f"{', '.join(model.input_names)}")
        if e.name in seen:
            raise ArtifactError(f"{source}: {what}: a second copy of the same input")
        seen.add(e.name)
        if e.size != model.vectors(e.name):
            raise ArtifactError(f"{source}: {what}: {e.size} vectors, the input has "
                                f"{model.vectors(e.name)}")
        if e.base + e.size > model.arch.dram1_depth:
            raise ArtifactError(f"{source}: {what} (base {e.base}, {e.size} vectors) does not "
                                f"fit DRAM1 ({model.arch.dram1_depth} vectors)")
        for other, base, size in taken:
            if e.base < base + size and base < e.base + e.size:
                raise ArtifactError(f"{source}: {what} (vectors {e.base}..{e.base + e.size - 1}"
                                    f") overlaps {other} (vectors {base}..{base + size - 1})")
        taken.append((what, e.base, e.size))


def _check_consts(model: TModel, key: str, depth: int, where: str, file, source: str) -> None:
    """Each entry of ``model.<key>``: its file holds ``size`` vectors, which fit ``depth``."""
    vb = model.arch.vector_bytes
    for i, c in enumerate(getattr(model, key)):
        path = file(c.file_name, f"{key}[{i}]")
        expected = c.size * vb
        got = path.stat().st_size
        if got != expected:
            raise ArtifactError(f"{source}: {key}[{i}] says {c.size} vectors ({expected} bytes "
                                f"of {vb}-byte vectors) but {c.file_name} has {got} bytes")
        if c.base + c.size > depth:
            raise ArtifactError(f"{source}: {key}[{i}] (base {c.base}, {c.size} vectors) does "
                                f"not fit {where} ({depth} vectors)")


def read_tmodel(path, check_files: bool = True) -> TModel:
    """Read a `.tmodel`; with ``check_files`` also check the files it points to."""
    path = Path(path)
    d = read_json(path, "model manifest (.tmodel JSON)", ArtifactError)
    model = tmodel_from_dict(d, source=str(path), directory=path.parent)
    if check_files:
        check_tmodel(model, source=str(path))
    return model


def write_tmodel(path, model: TModel) -> None:
    write_atomic(path, model.to_json())


# ------------------------------------------------------------------------------------ tdata

def read_tdata(path, arch: Architecture) -> np.ndarray:
    """Read constant vectors: (m, n) raw."""
    path = Path(path)
    data = read_bytes(path, "constants (.tdata)", ArtifactError)
    try:
        return numeric.decode_vectors(data, arch.dtype, arch.array_size)
    except ValueError as e:
        raise ArtifactError(f"{path}: {e}") from None


def write_tdata(path, raw, arch: Architecture) -> int:
    """Write (m, n) raw constant vectors; returns the number of vectors."""
    raw = np.asarray(raw)
    if raw.ndim != 2 or raw.shape[1] != arch.array_size:
        raise ValueError(f"constants must be (vectors, {arch.array_size}), got {raw.shape}")
    write_atomic(path, numeric.encode_vectors(raw, arch.dtype))
    return raw.shape[0]


# -------------------------------------------------------------------------------------- CSV

def read_csv(path, lanes: int) -> np.ndarray:
    """Emulator CSV: one vector per line, ``lanes`` comma-separated numbers → (m, lanes) float64.

    Blank lines are skipped. Errors name the file, the line and the column.
    """
    path = Path(path)
    text = read_text(path, "CSV file", ArtifactError)
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(",")
        if len(parts) != lanes:
            raise ArtifactError(f"{path} line {lineno}: {len(parts)} values, expected {lanes} "
                                f"(one vector of array_size lanes per line)")
        try:
            rows.append([float(p) for p in parts])
        except ValueError:
            col = next(i for i, p in enumerate(parts, 1) if not _is_float(p))
            raise ArtifactError(f"{path} line {lineno} column {col}: "
                                f"{parts[col - 1].strip()!r} is not a number") from None
    return np.array(rows, dtype=np.float64).reshape(-1, lanes)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def format_csv(values, raw: bool = False) -> str:
    """(m, n) values → CSV text, one vector per line (floats shortest-exact, or raw ints)."""
    values = np.asarray(values)
    if raw:
        return "".join(",".join(str(int(v)) for v in row) + "\n" for row in values)
    return "".join(",".join(repr(float(v)) for v in row) + "\n" for row in values)


def write_csv(path, values, raw: bool = False) -> None:
    write_atomic(path, format_csv(values, raw))


# ---------------------------------------------------------------------- architecture_params.h

_PARAM_KEYS = ("array_size", "dram0_depth", "dram1_depth", "local_depth", "accumulator_depth",
               "simd_registers_depth", "stride0_depth", "stride1_depth")


def architecture_params_h(arch: Architecture) -> str:
    """The C header of Tensil's drivers: ``#define TENSIL_ARCHITECTURE_<KEY> <value>``.

    Lookup-table parameters are added only when the architecture has tables.
    """
    lines = [("TENSIL_ARCHITECTURE_DATA_TYPE", f"TENSIL_DATA_TYPE_{arch.data_type}")]
    lines += [(f"TENSIL_ARCHITECTURE_{k.upper()}", str(getattr(arch, k))) for k in _PARAM_KEYS]
    if arch.lut_count:
        lines += [("TENSIL_ARCHITECTURE_LUT_COUNT", str(arch.lut_count)),
                  ("TENSIL_ARCHITECTURE_LUT_DEPTH", str(arch.lut_depth))]
    return "#pragma once\n\n" + "".join(f"#define {k:<41} {v}\n" for k, v in lines)

