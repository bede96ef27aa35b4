"""How blocks connect: packed records, ready/valid streams, interfaces, FIFOs and ports.

Every block of :mod:`tcu_hw.blocks` speaks this one vocabulary:

- :class:`Struct`: a packed record (named fields of fixed widths, first field lowest).
- :class:`Stream`: a ready/valid handshake over a :class:`Struct` payload, one named wire
  per field (``<name>_valid``, ``<name>_ready``, ``<name>_<field>``). A transfer happens in a
  cycle where ``valid & ready`` (:attr:`Stream.fire`). A stream is a port of the block that
  owns it, a ``SOURCE`` (the block drives ``valid`` and the payload and reads ``ready``) or a
  ``SINK`` (it reads ``valid`` and the payload and drives ``ready``). ``always_ready=True``
  says in the type that there is no back-pressure: a sink that takes a transfer in every
  cycle (``ready`` is the constant 1, not a wire), or a source that cannot wait (it may only
  feed an always-ready sink).
- :class:`Interface`: a named group of streams and plain signals that connects to its
  twin in one call (:class:`DramPort`, :class:`RamPort`, :class:`SharedRead`).
- :func:`connect` joins a source to a sink (or an interface to its twin) and checks
  directions, field names and widths, failing with a message that names both sides.
- :class:`RegFifo`, :class:`RingFifo` and :func:`queue`: FIFOs whose ends are streams.
- :func:`ports` lists a block's ports (docs and tests use it); :func:`named` names an output.

Rules every block keeps (tests check them with :func:`combinational_inputs`): ``valid``
never depends combinationally on the same stream's ``ready``; every output is a named wire
of its own (never an internal register or a constant).

::

    block A                 connect(a.out, b.inp)                 block B
    out: Stream(SOURCE) ── valid, payload ──────────────────▶ inp: Stream(SINK)
                        ◀────────────────────────── ready ──
"""

from __future__ import annotations

from types import SimpleNamespace

import pyrtl
from pyrtl import Const, WireVector

SOURCE, SINK = "source", "sink"


class ConnectError(ValueError):
    """Two ports that cannot be connected: the message names both and says why."""


# ------------------------------------------------------------------------------- records

class Struct:
    """A packed record: named fields of fixed widths, first field in the low bits.

    ``Struct(kind=3, addr=13).pack(kind=k, addr=a)`` gives one wire; ``unpack(wire)`` gives a
    namespace of slices. Missing fields pack as zero; zero-width fields unpack as a 1-bit 0.
    """

    def __init__(self, **widths: int) -> None:
        self.widths = {k: int(v) for k, v in widths.items()}
        self.offsets = {}
        at = 0
        for k, w in self.widths.items():
            self.offsets[k] = at
            at += w
        self.width = max(at, 1)

    def __eq__(self, other) -> bool:
        return isinstance(other, Struct) and self.widths == other.widths

    def __hash__(self) -> int:
        return hash(tuple(self.widths.items()))

    def __repr__(self) -> str:
        return "Struct(" + ", ".join(f"{k}={w}" for k, w in self.widths.items()) + ")"

    def pack(self, **values) -> WireVector:
        unknown = set(values) - set(self.widths)
        if unknown:
            raise KeyError(f"unknown fields {sorted(unknown)}")
        parts = []
        for k, w in self.widths.items():
            if w == 0:
                continue
            v = values.get(k)
            parts.append(Const(0, w) if v is None else field_value(v, w, k))
        return pyrtl.concat_list(parts) if parts else Const(0, 1)

    def unpack(self, wire: WireVector) -> SimpleNamespace:
        return SimpleNamespace(**{k: wire[self.offsets[k]:self.offsets[k] + w] if w else
                                  Const(0, 1) for k, w in self.widths.items()})


def _as_struct(payload) -> Struct:
    return payload if isinstance(payload, Struct) else Struct(data=int(payload))


# ------------------------------------------------------------------------------- streams

class Stream:
    """A ready/valid port carrying ``payload`` (a :class:`Struct`, or a width for a single
    ``data`` field), owned by one block as a ``SOURCE`` or a ``SINK``.

    Args:
        payload: the record carried (field wires ``<name>_<field>``; zero-width fields get
            no wire and read as a 1-bit 0).
        name: prefix of the wires.
        role: ``SOURCE`` or ``SINK``, as seen from the owning block.
        always_ready: no back-pressure: a sink that always takes, a source that cannot wait.

    Attributes: ``valid`` (1), ``ready`` (1; ``Const(1)`` when always ready), ``payload``
    (namespace of field wires), ``fields`` (the Struct), :attr:`fire`, :attr:`data`.
    """

    def __init__(self, payload, name: str, role: str, always_ready: bool = False) -> None:
        if role not in (SOURCE, SINK):
            raise ValueError(f"stream {name!r}: role must be SOURCE or SINK, got {role!r}")
        self.fields = _as_struct(payload)
        clash = {"valid", "ready"} & set(self.fields.widths)
        if clash:
            raise ValueError(f"stream {name!r}: a payload field may not be named "
                             f"{sorted(clash)} (the handshake wires)")
        self.name, self.role, self.always_ready = name, role, always_ready
        self.valid = WireVector(1, f"{name}_valid")
        self.ready = Const(1, 1) if always_ready else WireVector(1, f"{name}_ready")
        self.payload = SimpleNamespace(**{
            k: WireVector(w, f"{name}_{k}") if w else Const(0, 1)
            for k, w in self.fields.widths.items()})
        self._fire = None

    def __repr__(self) -> str:
        kind = ", always ready" if self.always_ready else ""
        return f"Stream({self.name!r}, {self.role}{kind}, {self.fields!r})"

    def peer(self, name: str) -> "Stream":
        """A new stream that connects to this one: the same payload and back-pressure, the
        other role (e.g. a test bench's source for a block's sink)."""
        return Stream(self.fields, name, SINK if self.role == SOURCE else SOURCE,
                      self.always_ready)

    def flipped(self) -> "Stream":
        """The same wires seen from the other side, for wiring inside the owning block: a
        block forwards its own sink port into an inner sink with
        ``connect(port.flipped(), inner)`` (and an inner source out through its own source
        port with ``connect(inner, port.flipped())``)."""
        twin = object.__new__(Stream)
        twin.__dict__.update(self.__dict__)
        twin.role = SINK if self.role == SOURCE else SOURCE
        return twin

    @property
    def fire(self) -> WireVector:
        """``valid & ready``: a transfer happens this cycle."""
        if self._fire is None:
            self._fire = self.valid if self.always_ready else self.valid & self.ready
        return self._fire

    @property
    def data(self) -> WireVector:
        """The payload packed as :attr:`fields` packs it (a single field: that wire)."""
        names = [k for k, w in self.fields.widths.items() if w]
        if len(names) == 1:
            return getattr(self.payload, names[0])
        return self.fields.pack(**{k: getattr(self.payload, k) for k in names})

    def drive(self, valid, packed=None, **fields) -> None:
        """Drive ``valid`` and the payload, from a packed wire or by field: the owner drives
        its sources this way, a parent (or a test bench) the sinks of a block it holds. Wires
        are zero-extended or truncated to their field, an integer constant must fit, fields
        not given are 0, unknown fields are refused."""
        unknown = set(fields) - set(self.fields.widths)
        if unknown or (packed is not None and fields):
            raise ConnectError(f"{self.name}.drive(): unknown fields {sorted(unknown)} "
                               f"(the payload has {list(self.fields.widths)})" if unknown else
                               f"{self.name}.drive(): give a packed payload or fields, not both")
        self.valid <<= valid
        if packed is not None:
            fields = vars(self.fields.unpack(pyrtl.as_wires(packed)))
        for k, w in self.fields.widths.items():
            if w:
                wire = getattr(self.payload, k)
                wire <<= field_value(fields[k], w, f"{self.name}.{k}") if k in fields \
                    else Const(0, w)

    def wires(self) -> list[tuple[str, WireVector, bool]]:
        """(member, wire, driven by the owner) of every wire of the stream."""
        out = [("valid", self.valid, self.role == SOURCE)]
        if not self.always_ready:
            out.append(("ready", self.ready, self.role == SINK))
        out += [(k, getattr(self.payload, k), self.role == SOURCE)
                for k, w in self.fields.widths.items() if w]
        return out


def _check_streams(src: Stream, dst: Stream) -> None:
    where = f"connect({src.name} → {dst.name})"
    if src.role != SOURCE or dst.role != SINK:
        raise ConnectError(f"{where}: the first stream must be a source and the second a sink "
                           f"(got a {src.role} and a {dst.role})")
    if src.fields != dst.fields:
        diff = [f"{k}: {src.fields.widths.get(k, '-')} vs {dst.fields.widths.get(k, '-')} bits"
                for k in dict.fromkeys([*src.fields.widths, *dst.fields.widths])
                if src.fields.widths.get(k) != dst.fields.widths.get(k)]
        raise ConnectError(f"{where}: payloads differ (source vs sink): {'; '.join(diff)}")
    if src.always_ready and not dst.always_ready:
        raise ConnectError(f"{where}: the source cannot wait (always ready) but the sink "
                           f"may hold ready low; put a FIFO in between or use an always-ready "
                           f"sink")


def _connect_streams(src: Stream, dst: Stream) -> None:
    _check_streams(src, dst)
    dst.valid <<= src.valid
    for k, w in src.fields.widths.items():
        if w:
            wire = getattr(dst.payload, k)
            wire <<= getattr(src.payload, k)
    if not src.always_ready:
        src.ready <<= dst.ready


# ---------------------------------------------------------------------------- interfaces

class Interface:
    """A named group of streams and plain signals, connected to its twin in one call.

    Subclasses name their two ``SIDES``, keep their constructor's shape arguments in
    ``_shape`` (for :meth:`twin`) and declare members with :meth:`_stream` and
    :meth:`_signal`; ``side`` says which side this instance is (the twin has the other one).
    """

    SIDES: tuple[str, str] = ("a", "b")

    def __init__(self, name: str, side: str) -> None:
        if side not in self.SIDES:
            raise ValueError(f"{type(self).__name__} {name!r}: side must be one of "
                             f"{self.SIDES}, got {side!r}")
        self.name, self.side = name, side
        self._members: dict = {}                    # member: Stream or (wire, driven)

    def twin(self, name: str) -> "Interface":
        """A new interface of the same shape for the other side (connect it to this one)."""
        a, b = self.SIDES
        return type(self)(*self._shape, name=name, side=b if self.side == a else a)

    def members(self) -> dict:
        """{member: Stream, or (wire, driven by the owner)} in declaration order."""
        return dict(self._members)

    def _stream(self, member: str, payload, role: str) -> Stream:
        s = Stream(payload, f"{self.name}_{member}", role)
        self._members[member] = s
        return s

    def _signal(self, member: str, width: int, driven: bool) -> WireVector:
        w = WireVector(width, f"{self.name}_{member}")
        self._members[member] = (w, driven)
        return w

    def wires(self) -> list[tuple[str, WireVector, bool]]:
        """(member, wire, driven by the owner) of every wire of the interface."""
        out = []
        for member, m in self._members.items():
            if isinstance(m, Stream):
                out += [(f"{member}.{k}", w, d) for k, w, d in m.wires()]
            else:
                out.append((member, m[0], m[1]))
        return out


def _connect_interfaces(a: Interface, b: Interface) -> None:
    where = f"connect({a.name} ↔ {b.name})"
    if type(a) is not type(b) or a.side == b.side or set(a._members) != set(b._members):
        raise ConnectError(f"{where}: not twins ({type(a).__name__} {a.side} side, "
                           f"{type(b).__name__} {b.side} side)")
    pairs = []
    for member, ma in a._members.items():                 # check everything, then connect
        mb = b._members[member]
        if isinstance(ma, Stream):
            src, dst = (ma, mb) if ma.role == SOURCE else (mb, ma)
            _check_streams(src, dst)
            pairs.append((src, dst))
            continue
        (wa, da), (wb, _) = ma, mb
        if wa.bitwidth != wb.bitwidth:
            raise ConnectError(f"{where}: signal {member!r}: {wa.bitwidth} vs {wb.bitwidth} "
                               f"bits")
        pairs.append((wa, wb) if da else (wb, wa))
    for src, dst in pairs:
        if isinstance(src, Stream):
            _connect_streams(src, dst)
        else:
            dst <<= src


def connect(src, dst) -> None:
    """Connect a source :class:`Stream` to a sink, or an :class:`Interface` to its twin.

    Checks directions (source first), payload field names and widths, and back-pressure
    (an always-ready source needs an always-ready sink); raises :class:`ConnectError`."""
    if isinstance(src, Stream) and isinstance(dst, Stream):
        _connect_streams(src, dst)
    elif isinstance(src, Interface) and isinstance(dst, Interface):
        _connect_interfaces(src, dst)
    else:
        raise ConnectError(f"connect() takes two streams or two interfaces, got "
                           f"{type(src).__name__} and {type(dst).__name__}")


class DramPort(Interface):
    """A DRAM port at vector granularity, between the core and a memory (an AXI master, a
    DRAM model).

    Args:
        addr_bits: bits of a vector address.
        len_bits: bits of a transfer's vector count − 1.
        vector_bits: bits of one vector.
        name: prefix of the wires (``<name>_req_valid`` ...).
        side: ``"core"`` or ``"memory"``: which side this instance is.

    Ports:
        req: :class:`Stream` core → memory: ``write`` (1), ``addr`` (``addr_bits``), ``len``
            (``len_bits``): one transfer of consecutive vectors; served in order.
        rdata: :class:`Stream` memory → core: ``data`` (``vector_bits``), the vectors read,
            in order.
        wdata: :class:`Stream` core → memory: ``data`` (``vector_bits``), the vectors to
            write, in order (the data of a write may come before its request).
        writes_done: memory → core (1): every write request and write vector the memory
            has taken has landed (for an AXI memory: acknowledged), so a later access through
            another port cannot overtake it.
    """

    SIDES = ("core", "memory")

    def __init__(self, addr_bits: int, len_bits: int, vector_bits: int, name: str, *,
                 side: str) -> None:
        super().__init__(name, side)
        self._shape = (addr_bits, len_bits, vector_bits)
        out, inp = (SOURCE, SINK) if side == "core" else (SINK, SOURCE)
        self.req = self._stream("req", Struct(write=1, addr=addr_bits, len=len_bits), out)
        self.rdata = self._stream("rdata", vector_bits, inp)
        self.wdata = self._stream("wdata", vector_bits, out)
        self.writes_done = self._signal("writes_done", 1, side == "memory")


class RamPort(Interface):
    """One port of a memory with registered reads, between a user and the memory. No
    handshake: the memory serves every cycle.

    Args:
        addr_bits: bits of an address.
        width: bits of a word.
        name: prefix of the wires (``<name>_addr`` ...).
        side: ``"user"`` or ``"memory"``: which side this instance is.

    Ports:
        addr, write, wdata: driven by the user (``addr_bits``, 1, ``width`` bits); a write
            commits at the end of its cycle.
        rdata: driven by the memory (``width``): the word at the previous cycle's address.
    """

    SIDES = ("user", "memory")

    def __init__(self, addr_bits: int, width: int, name: str, *, side: str) -> None:
        super().__init__(name, side)
        self._shape = (addr_bits, width)
        user = side == "user"
        self.addr = self._signal("addr", addr_bits, user)
        self.write = self._signal("write", 1, user)
        self.wdata = self._signal("wdata", width, user)
        self.rdata = self._signal("rdata", width, not user)


class _Shared(Interface):
    """A share of a RAM port that an arbiter grants cycle by cycle (see :class:`SharedRead`
    and :class:`SharedWrite`): ``want`` and ``addr`` from the client, ``grant`` from the
    arbiter, and the data member ``DATA`` in the direction the subclass gives it."""

    SIDES = ("client", "arbiter")
    DATA = ""                           # "rdata" (driven by the arbiter) or "wdata" (client)

    def __init__(self, addr_bits: int, width: int, name: str, *, side: str) -> None:
        super().__init__(name, side)
        self._shape = (addr_bits, width)
        client = side == "client"
        self.want = self._signal("want", 1, client)
        self.addr = self._signal("addr", addr_bits, client)
        if self.DATA == "wdata":
            self.wdata = self._signal("wdata", width, client)
        self.grant = self._signal("grant", 1, not client)
        if self.DATA == "rdata":
            self.rdata = self._signal("rdata", width, not client)


class SharedRead(_Shared):
    """A read-only share of a RAM port that an arbiter grants cycle by cycle, between a
    client and the arbiter (the port's owner).

    Args:
        addr_bits: bits of an address.
        width: bits of a word.
        name: prefix of the wires (``<name>_want`` ...).
        side: ``"client"`` or ``"arbiter"``: which side this instance is.

    Ports:
        want, addr: driven by the client (1, ``addr_bits``): read ``addr`` this cycle if
            granted; ``want`` must not depend on ``grant``.
        grant: driven by the arbiter (1): the read happens this cycle.
        rdata: driven by the arbiter (``width``): the word read in the previous cycle (valid
            the cycle after a grant).
    """

    DATA = "rdata"


class SharedWrite(_Shared):
    """A write-only share of a RAM port that an arbiter grants cycle by cycle, between a
    client and the arbiter (the port's owner).

    Args:
        addr_bits: bits of an address.
        width: bits of a word.
        name: prefix of the wires (``<name>_want`` ...).
        side: ``"client"`` or ``"arbiter"``: which side this instance is.

    Ports:
        want, addr, wdata: driven by the client (1, ``addr_bits``, ``width``): write
            ``wdata`` at ``addr`` this cycle if granted; ``want`` must not depend on
            ``grant``.
        grant: driven by the arbiter (1): the write commits at the end of this cycle.
    """

    DATA = "wdata"


# ---------------------------------------------------------------------------------- FIFOs

def _fifo_streams(payload, depth: int, name: str) -> tuple[Stream, Stream]:
    """A FIFO's ``enq`` sink and ``deq`` source (``depth`` checked)."""
    if depth < 1:
        raise ValueError(f"FIFO {name!r}: depth must be at least 1")
    fields = _as_struct(payload)
    return Stream(fields, f"{name}_enq", SINK), Stream(fields, f"{name}_deq", SOURCE)


def _fifo_ends(payload, depth: int, name: str) -> tuple[Stream, Stream, list]:
    """A register FIFO's ``enq`` sink, ``deq`` source and ``depth`` entry registers
    (``<name>_d<i>``)."""
    enq, deq = _fifo_streams(payload, depth, name)
    data = [pyrtl.Register(enq.data.bitwidth, f"{name}_d{i}") for i in range(depth)]
    return enq, deq, data


class RegFifo:
    """A FIFO of ``depth`` entries held in registers, head at entry 0 (a shift queue).

    Args:
        payload: the record (or width) of an entry.
        depth: entries (≥ 1).
        name: prefix of the wires and registers.
        pipe: ``enq.ready`` also when full and the head leaves this cycle (as Chisel's
            ``Queue(pipe = true)``: a combinational path from ``deq.ready`` back to
            ``enq.ready``); False: ``ready`` = not full, from registers, which cuts a chain of
            readies at the cost of a cycle when the queue was full.

    Ports:
        enq: :class:`Stream` sink; ``ready`` = not full, or (``pipe``) the head leaves this
            cycle.
        deq: :class:`Stream` source: the head.
        entries: list of ``valid`` (1) / ``record`` (packed) outputs, head first (for hazard
            checks).
        count: output, entries held.
        full: output (1), all entries held: a registered "not ready" that does not look at
            ``deq.ready``.

    Latency: one cycle from enqueue to ``deq.valid``; one enqueue and one dequeue per
    cycle.
    """

    def __init__(self, payload, depth: int, name: str, pipe: bool = True) -> None:
        self.enq, self.deq, data = _fifo_ends(payload, depth, name)
        valid = [pyrtl.Register(1, f"{name}_v{i}") for i in range(depth)]
        deq = valid[0] & self.deq.ready
        self.enq.ready <<= (~valid[-1] | deq) if pipe else ~valid[-1]
        enq = self.enq.fire
        incoming = self.enq.data
        for i in range(depth):
            above_v = valid[i + 1] if i + 1 < depth else Const(0, 1)
            above_d = data[i + 1] if i + 1 < depth else data[i]
            below_v = valid[i - 1] if i > 0 else Const(1, 1)
            # the new entry lands in the first free slot, or one lower when the head leaves
            land_here = enq & pyrtl.select(deq, valid[i] & ~above_v, ~valid[i] & below_v)
            keep_v = pyrtl.select(deq, above_v, valid[i])
            keep_d = pyrtl.select(deq, above_d, data[i])
            valid[i].next <<= keep_v | land_here
            data[i].next <<= pyrtl.select(land_here, incoming, keep_d)
        self.deq.drive(valid[0], data[0])
        self.entries = [SimpleNamespace(valid=named(v, f"{name}_entry{i}_valid"),
                                        record=named(d, f"{name}_entry{i}_record"))
                        for i, (v, d) in enumerate(zip(valid, data))]
        self.count = named(sum_bits(valid), f"{name}_count")
        self.full = named(valid[-1], f"{name}_full")


class RingFifo:
    """A FIFO of ``depth`` entries held as a ring (write and read pointers) in a small
    memory with a combinational read: an entry is written once and the head is read at the
    read pointer, so synthesis builds the storage from distributed RAM (Xilinx RAM32M/RAM64M,
    ECP5 DPR16X4) instead of flip-flops and multiplexers, where :class:`RegFifo`'s shift
    queue costs a register and a LUT per bit and entry. The entries are not exposed (use
    :class:`RegFifo` for hazard checks).

    Args:
        payload: the record (or width) of an entry.
        depth: entries (≥ 1).
        name: prefix of the wires and registers.
        pipe: as :class:`RegFifo`'s.

    Ports:
        enq: :class:`Stream` sink; ``ready`` = not full, or (``pipe``) the head leaves this
            cycle.
        deq: :class:`Stream` source: the head.
        count: output, entries held.
        full: output (1), all entries held.

    Latency: as :class:`RegFifo`: one cycle from enqueue to ``deq.valid``; one enqueue and
    one dequeue per cycle.
    """

    def __init__(self, payload, depth: int, name: str, pipe: bool = True) -> None:
        self.enq, self.deq = _fifo_streams(payload, depth, name)
        width = self.enq.data.bitwidth
        bits = max((depth - 1).bit_length(), 1)
        wp = pyrtl.Register(bits, f"{name}_wp")
        rp = pyrtl.Register(bits, f"{name}_rp")
        held = pyrtl.Register(depth.bit_length(), f"{name}_held")
        full = held == depth
        deq = (held != 0) & self.deq.ready
        self.enq.ready <<= (~full | deq) if pipe else ~full
        enq = self.enq.fire
        mem = pyrtl.MemBlock(width, bits, f"{name}_mem", asynchronous=True)
        mem[wp] <<= pyrtl.MemBlock.EnabledWrite(self.enq.data, enq)

        def step(p):
            return pyrtl.select(p == depth - 1, Const(0, bits), (p + 1)[:bits])

        wp.next <<= pyrtl.select(enq, step(wp), wp)
        rp.next <<= pyrtl.select(deq, step(rp), rp)
        held.next <<= (held + enq - deq)[:held.bitwidth]
        self.deq.drive(held != 0, mem[rp])
        self.count = named(held, f"{name}_count")
        self.full = named(full, f"{name}_full")


def queue(src: Stream, depth: int, name: str) -> Stream:
    """``src`` through a new :class:`RegFifo` of ``depth`` entries; returns its ``deq``
    stream (as Chisel's ``Queue(enq, entries)``)."""
    fifo = RegFifo(src.fields, depth, name)
    connect(src, fifo.enq)
    return fifo.deq


# ---------------------------------------------------------------------------------- wires

def sum_bits(bits) -> WireVector:
    """Number of set wires among ``bits`` (small counts)."""
    total = Const(0, 1)
    for b in bits:
        total = total + b
    return total


def field_value(value, width: int, what: str) -> WireVector:
    """A field's value as a ``width``-bit wire: a wire is zero-extended or truncated (as
    PyRTL's ``<<=`` would); an integer constant must fit."""
    if isinstance(value, int) and not 0 <= value < 1 << width:
        raise ConnectError(f"{what}: {value} does not fit {width} bits")
    return fit(value, width)


def fit(wire, width: int) -> WireVector:
    """``wire`` zero-extended or truncated to ``width`` bits (unsigned)."""
    wire = pyrtl.as_wires(wire)
    return wire.zero_extended(width) if wire.bitwidth < width else wire[:width]


def data_register(width: int, name: str) -> pyrtl.Register:
    """A register that only carries data no control depends on (a delay line): the Verilog
    export leaves it out of the reset (:func:`tcu_hw.verilog.verilog`), so synthesis may build
    a chain of them as shift-register LUTs (Xilinx SRL) instead of flip-flops. After a reset
    it holds stale data until new data shifts in; PyRTL's simulation starts it at 0."""
    reg = pyrtl.Register(width, name)
    reg.no_reset = True
    return reg


def named(value, name: str) -> WireVector:
    """A wire of its own named ``name``, driven by ``value`` (a register, a constant or any
    expression): every output port of a block is one, and internal signals worth seeing in
    waveforms and probes get one too."""
    value = pyrtl.as_wires(value)
    out = WireVector(value.bitwidth, name)
    out <<= value
    return out


def _exposed(block_object, prefix: str = ""):
    """(attribute path, value) of every wire, stream and interface a block object exposes as
    a public attribute, directly or in lists and namespaces (nested blocks are not walked)."""
    def walk(value, path):
        if isinstance(value, Stream | Interface | WireVector):
            yield path, value
        elif isinstance(value, SimpleNamespace):
            for k, v in vars(value).items():
                if not k.startswith("_"):
                    yield from walk(v, f"{path}.{k}")
        elif isinstance(value, (list, tuple)):
            for k, v in enumerate(value):
                yield from walk(v, f"{path}[{k}]")

    for attr, value in vars(block_object).items():
        if not attr.startswith("_"):
            yield from walk(value, prefix + attr)


def handshakes(block_object) -> list[tuple[str, Stream | Interface]]:
    """(attribute path, stream or interface) of every handshaking port of a block object
    (an object reachable by two paths is listed under each)."""
    return [(path, v) for path, v in _exposed(block_object)
            if isinstance(v, Stream | Interface)]


def ports(block_object, block: pyrtl.Block | None = None,
          prefix: str = "") -> list[tuple[str, WireVector, str]]:
    """(attribute path, wire, ``"input"`` or ``"output"``) of every port a block object
    exposes as a public attribute: wires, streams, interfaces, and lists and namespaces of
    these (nested blocks are not ports). A plain wire is an output when logic in ``block``
    (default: the working block, where the object was built) drives it, so call this on an
    instance whose inputs are not connected yet."""
    block = block or pyrtl.working_block()
    driven = {w for net in block.logic for w in net.dests}
    out: list = []
    for path, value in _exposed(block_object, prefix):
        if isinstance(value, WireVector):
            out.append((path, value, "output" if value in driven else "input"))
            continue
        for member, wire, owner_drives in value.wires():
            out.append((f"{path}.{member}", wire, "output" if owner_drives else "input"))
    return out


def name_ports(block_object, prefix: str) -> None:
    """Make every public output of a block a named wire of its own: an anonymous wire, a
    register or a constant exposed as an attribute is replaced by :func:`port`
    ``<prefix>_<attribute>`` (lists: ``<prefix>_<attribute><k>``; namespaces:
    ``<prefix>_<group>_<attribute>``). Streams and interfaces are named already."""
    for attr, value in list(vars(block_object).items()):
        if attr.startswith("_"):
            continue
        if isinstance(value, WireVector) and _needs_port(value):
            setattr(block_object, attr, named(value, f"{prefix}_{attr}"))
        elif isinstance(value, SimpleNamespace):
            name_ports(value, f"{prefix}_{attr}")
        elif isinstance(value, list) and value and all(isinstance(v, WireVector)
                                                       for v in value):
            setattr(block_object, attr, [named(v, f"{prefix}_{attr}{k}") if _needs_port(v)
                                         else v for k, v in enumerate(value)])


def _needs_port(wire: WireVector) -> bool:
    return type(wire) is not WireVector or wire.name.startswith("tmp")


def combinational_inputs(wire: WireVector, block: pyrtl.Block | None = None) -> set:
    """The wires whose value reaches ``wire`` in the same cycle (through logic, not through a
    register or a memory write), ``wire`` included: a design-rule check, e.g. that a
    stream's ``valid`` does not depend on its ``ready``."""
    block = block or pyrtl.working_block()
    drivers, _ = block.net_connections()
    seen, todo = set(), [wire]
    while todo:
        w = todo.pop()
        if w in seen:
            continue
        seen.add(w)
        net = drivers.get(w)
        if net is None or net.op == "r":
            continue
        todo.extend(net.args)
    return seen
