"""Architectures (`.tarch`, TCU.md §1) and implementation options in ``tcu_hw.arch``.

The six shipped presets against the spec's table and the conformance layouts, `.tarch` load/save
round trips (with and without the lookup-table extension keys), one clear error naming the file
and the key for every kind of bad input, preset resolution, and :class:`Options`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tcu_hw import numeric
from tcu_hw.arch import (BOARD_AXI_WIDTH, PRESET_DIR, PRESETS, RANGES, TARCH_KEYS,
                         Architecture, Options, arch_stem, beats_per_vector, board_axi_width,
                         load_arch, preset, resolve_arch)
from tcu_hw.errors import ArchitectureError, OptionsError, TcuError

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
ENCODINGS = SHARED / "conformance" / "encodings.json"

#: TCU.md §1: name -> (n, dram0, dram1, local, accumulators, instruction bytes)
SPEC_BOARDS = {
    "pynqz1": (8, 1_048_576, 1_048_576, 8192, 2048, 8),
    "artya7100t": (8, 1_048_576, 1_048_576, 8192, 2048, 8),
    "cmoda7": (4, 4096, 32768, 4096, 4096, 8),
    "ultra96v2": (16, 2_097_152, 2_097_152, 20480, 4096, 9),
    "zcu104": (32, 2_097_152, 2_097_152, 16384, 4096, 9),
    "zcu104_uram": (32, 2_097_152, 2_097_152, 49152, 20480, 9),
}

VALID = {
    "data_type": "FP16BP8", "array_size": 8, "dram0_depth": 1_048_576,
    "dram1_depth": 1_048_576, "local_depth": 8192, "accumulator_depth": 2048,
    "simd_registers_depth": 1, "stride0_depth": 8, "stride1_depth": 8,
    "number_of_threads": 1, "thread_queue_depth": 8,
}


def encodings() -> dict:
    if not ENCODINGS.exists():
        pytest.skip(f"{ENCODINGS} is missing: the shared conformance data must sit next to "
                    f"the repository (../shared)")
    return json.loads(ENCODINGS.read_text())


def write_tarch(path: Path, content) -> Path:
    """Write a dict as JSON, or a str/bytes as is."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(json.dumps(content, indent=4))
    return path


def with_changes(**changes) -> dict:
    """VALID with keys changed; a value of ``...`` removes the key."""
    d = dict(VALID)
    for key, value in changes.items():
        if value is ...:
            del d[key]
        else:
            d[key] = value
    return d


def load_error(path: Path) -> str:
    """The message of the single ArchitectureError that loading ``path`` raises."""
    with pytest.raises(ArchitectureError) as info:
        load_arch(path)
    assert isinstance(info.value, TcuError)
    message = str(info.value)
    assert str(path) in message
    return message


# ------------------------------------------------------------------------ presets

def test_presets_list_the_six_boards_and_their_integer_variants():
    assert set(PRESETS) >= set(SPEC_BOARDS)
    assert {p.stem for p in PRESET_DIR.glob("*.tarch")} == set(PRESETS)
    for name in set(PRESETS) - set(SPEC_BOARDS):
        board, kind = name.rsplit("_", 1)
        arch, base = preset(name), preset(board)
        assert arch.data_type == kind.upper() and arch.dtype.is_integer
        assert arch.differences(base) == [f"data_type {arch.data_type} vs FP16BP8",
                                          "simd_registers_depth 4 vs 1"]


@pytest.mark.parametrize("name", sorted(SPEC_BOARDS))
def test_preset_values_match_spec_table(name):
    n, dram0, dram1, local, acc, nbytes = SPEC_BOARDS[name]
    arch = preset(name)
    assert (arch.array_size, arch.dram0_depth, arch.dram1_depth, arch.local_depth,
            arch.accumulator_depth) == (n, dram0, dram1, local, acc)
    assert arch.data_type == "FP16BP8" and arch.dtype is numeric.FP16BP8
    assert (arch.stride0_depth, arch.stride1_depth, arch.simd_registers_depth) == (8, 8, 1)
    assert (arch.number_of_threads, arch.thread_queue_depth) == (1, 8)
    assert (arch.lut_count, arch.lut_depth) == (0, 0)
    assert arch.layout.instruction_bytes == nbytes
    assert arch.vector_bytes == 2 * n


@pytest.mark.parametrize("name", sorted(SPEC_BOARDS))
def test_resolve_arch_by_name_equals_preset(name):
    assert resolve_arch(name) == preset(name)
    assert resolve_arch(PRESET_DIR / f"{name}.tarch") == preset(name)
    assert resolve_arch(str(PRESET_DIR / f"{name}.tarch")) == preset(name)


def test_presets_match_conformance_shipped_boards():
    boards = encodings()["shipped_boards"]
    assert set(boards) == set(SPEC_BOARDS)
    for name, entry in boards.items():
        arch = preset(name)
        assert arch.to_dict() == entry["tarch"], name
        assert Architecture.from_dict(entry["tarch"]) == arch, name
        assert arch.layout.as_dict() == entry["layout"], name
        assert entry["layout"]["instruction_bytes"] == SPEC_BOARDS[name][5], name


@pytest.mark.parametrize("name", sorted(SPEC_BOARDS))
def test_preset_files_have_exactly_the_eleven_keys(name):
    d = json.loads((PRESET_DIR / f"{name}.tarch").read_text())
    assert list(d) == list(TARCH_KEYS)
    assert list(preset(name).to_dict()) == list(TARCH_KEYS)


def test_unknown_preset_raises():
    with pytest.raises(ArchitectureError, match="pynqz1"):
        preset("pynq1")


# ------------------------------------------------------------------------ round trips

@pytest.mark.parametrize("name", sorted(SPEC_BOARDS))
def test_preset_save_load_round_trip(name, tmp_path):
    arch = preset(name)
    path = tmp_path / f"{name}.tarch"
    arch.save(path)
    again = load_arch(path)
    assert again == arch
    assert json.loads(path.read_text()) == json.loads((PRESET_DIR / f"{name}.tarch").read_text())


@pytest.mark.parametrize("extension", [
    {},
    {"lut_count": 0},
    {"lut_depth": 0},
    {"lut_count": 0, "lut_depth": 0},
    {"lut_count": 1, "lut_depth": 16},
])
def test_extension_keys_written_back_as_given(extension, tmp_path):
    original = {**VALID, **extension}
    src = write_tarch(tmp_path / "in.tarch", original)
    arch = load_arch(src)
    assert (arch.lut_count, arch.lut_depth) == (extension.get("lut_count", 0),
                                                extension.get("lut_depth", 0))
    out = tmp_path / "out.tarch"
    arch.save(out)
    saved = json.loads(out.read_text())
    assert saved == original
    assert list(saved) == list(original)
    assert load_arch(out) == arch
    assert arch.to_dict() == original


def test_nonzero_extension_written_even_when_built_directly():
    arch = Architecture(**{**VALID, "simd_registers_depth": 2, "lut_count": 2, "lut_depth": 4})
    d = arch.to_dict()
    assert (d["lut_count"], d["lut_depth"]) == (2, 4)
    assert "lut_count" not in Architecture(**VALID).to_dict()
    assert "lut_depth" not in Architecture(**VALID).to_dict()


def test_extension_keys_do_not_affect_equality(tmp_path):
    plain = load_arch(write_tarch(tmp_path / "a.tarch", VALID))
    spelled = load_arch(write_tarch(tmp_path / "b.tarch",
                                    {**VALID, "lut_count": 0, "lut_depth": 0}))
    assert plain == spelled
    assert plain.to_dict() != spelled.to_dict()


@st.composite
def arch_dicts(draw):
    """Valid `.tarch` dicts in canonical key order, with or without the extension keys."""
    d = {"data_type": draw(st.sampled_from(list(numeric.DATA_TYPES)))}
    for key in TARCH_KEYS[1:]:
        lo, hi = RANGES[key]
        d[key] = draw(st.one_of(st.sampled_from([lo, hi]), st.integers(lo, hi)))
    lo, hi = RANGES["lut_count"]
    lut_count = draw(st.integers(lo, min(hi, d["simd_registers_depth"])))
    if lut_count:
        lut_depth = draw(st.one_of(st.sampled_from([2, RANGES["lut_depth"][1]]),
                                   st.integers(2, RANGES["lut_depth"][1])))
        d["lut_count"], d["lut_depth"] = lut_count, lut_depth
    else:
        if draw(st.booleans()):
            d["lut_count"] = 0
        if draw(st.booleans()):
            d["lut_depth"] = 0
    return d


@settings(max_examples=150, deadline=None)
@given(d=arch_dicts())
def test_random_architecture_round_trip(d, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tarch")
    arch = load_arch(write_tarch(folder / "in.tarch", d))
    assert arch == Architecture(**d)
    assert arch == Architecture.from_dict(d)
    out = folder / "out.tarch"
    arch.save(out)
    saved = json.loads(out.read_text())
    assert saved == d and list(saved) == list(d)
    again = load_arch(out)
    assert again == arch and again.to_dict() == arch.to_dict()
    assert arch.layout.instruction_bytes >= 4


# ------------------------------------------------------------------------ bad input

def test_missing_key(tmp_path):
    msg = load_error(write_tarch(tmp_path / "a.tarch", with_changes(local_depth=...)))
    assert "missing" in msg and "'local_depth'" in msg


def test_misspelled_key_suggests_close_match(tmp_path):
    d = with_changes(array_size=...)
    d["arraysize"] = 8
    msg = load_error(write_tarch(tmp_path / "a.tarch", d))
    assert "unknown key 'arraysize'" in msg
    assert "did you mean 'array_size'" in msg
    assert "missing key 'array_size'" in msg


def test_unknown_extra_key(tmp_path):
    msg = load_error(write_tarch(tmp_path / "a.tarch", {**VALID, "lut_cnt": 1}))
    assert "unknown key 'lut_cnt'" in msg and "did you mean 'lut_count'" in msg


@pytest.mark.parametrize("key, value, allowed", [
    ("array_size", 1, "2..256"),
    ("array_size", 257, "2..256"),
    ("dram0_depth", 1, "2..4294967296"),
    ("dram1_depth", 2 ** 32 + 1, "2..4294967296"),
    ("local_depth", 65537, "2..65536"),
    ("accumulator_depth", 0, "2..65536"),
    ("simd_registers_depth", 17, "0..16"),
    ("simd_registers_depth", -1, "0..16"),
    ("stride0_depth", 0, "1..256"),
    ("stride1_depth", 257, "1..256"),
    ("number_of_threads", 2, "1..1"),
    ("thread_queue_depth", 0, "1.."),
    ("lut_count", 16, "0..15"),
])
def test_out_of_range_value(tmp_path, key, value, allowed):
    msg = load_error(write_tarch(tmp_path / "a.tarch", {**VALID, key: value}))
    assert f"'{key}'" in msg and "out of range" in msg and allowed in msg
    assert str(value) in msg


@pytest.mark.parametrize("value", ["8", 8.0, True, False, None, [8], {"n": 8}])
def test_wrong_type_value(tmp_path, value):
    msg = load_error(write_tarch(tmp_path / "a.tarch", with_changes(array_size=value)))
    assert "'array_size'" in msg and "integer" in msg


def test_wrong_type_value_in_raw_json_text(tmp_path):
    text = json.dumps(VALID).replace('"array_size": 8', '"array_size": 8.0')
    assert '"array_size": 8.0' in text
    msg = load_error(write_tarch(tmp_path / "a.tarch", text))
    assert "'array_size'" in msg and "8.0" in msg


@pytest.mark.parametrize("value", ["FP16", "fp16bp8", "INT4", "int8", "", 16, None, ["FP16BP8"],
                                   {"name": "FP16BP8"}])
def test_bad_data_type(tmp_path, value):
    msg = load_error(write_tarch(tmp_path / "a.tarch", with_changes(data_type=value)))
    assert "'data_type'" in msg
    assert "FP16BP8" in msg and "FP8BP4" in msg      # lists what is allowed


@pytest.mark.parametrize("text", ["{", "", "{'data_type': 'FP16BP8'}", '{"a": 1,}'])
def test_invalid_json(tmp_path, text):
    msg = load_error(write_tarch(tmp_path / "a.tarch", text))
    assert "JSON" in msg


@pytest.mark.parametrize("text", ["[1, 2]", "8", "null", '"pynqz1"'])
def test_non_object_json(tmp_path, text):
    msg = load_error(write_tarch(tmp_path / "a.tarch", text))
    assert "object" in msg


def test_non_utf8_file(tmp_path):
    load_error(write_tarch(tmp_path / "a.tarch", b"\xff\xfe{\x00\x00\x80"))


def test_missing_file(tmp_path):
    load_error(tmp_path / "nope.tarch")


def test_directory_instead_of_file(tmp_path):
    folder = tmp_path / "dir.tarch"
    folder.mkdir()
    load_error(folder)


def test_lut_depth_without_lut_count(tmp_path):
    msg = load_error(write_tarch(tmp_path / "a.tarch", {**VALID, "lut_depth": 16}))
    assert "'lut_depth'" in msg and "'lut_count'" in msg


@pytest.mark.parametrize("depth", [None, 0, 1])
def test_lut_count_needs_lut_depth_of_at_least_two(tmp_path, depth):
    d = {**VALID, "lut_count": 1}
    if depth is not None:
        d["lut_depth"] = depth
    msg = load_error(write_tarch(tmp_path / "a.tarch", d))
    assert "'lut_depth'" in msg and "2..1024" in msg


def test_lut_count_exceeds_simd_registers(tmp_path):
    d = {**VALID, "simd_registers_depth": 1, "lut_count": 2, "lut_depth": 16}
    msg = load_error(write_tarch(tmp_path / "a.tarch", d))
    assert "'lut_count'" in msg and "'simd_registers_depth'" in msg


def test_several_problems_reported_together(tmp_path):
    d = with_changes(local_depth=..., array_size="8", dram0_depth=1)
    d["stride_depth"] = 8
    msg = load_error(write_tarch(tmp_path / "a.tarch", d))
    assert "4 problems" in msg
    for key in ("'local_depth'", "'array_size'", "'dram0_depth'", "'stride_depth'"):
        assert key in msg


def test_lut_problem_reported_with_other_problems(tmp_path):
    # the module promises every problem at once, the lookup-table rules included
    d = with_changes(array_size=1, lut_depth=16)
    msg = load_error(write_tarch(tmp_path / "a.tarch", d))
    assert "2 problems" in msg
    assert "'array_size'" in msg and "'lut_depth'" in msg


def test_from_dict_names_the_source():
    with pytest.raises(ArchitectureError, match=r"^my source: .*'array_size'"):
        Architecture.from_dict(with_changes(array_size=0), source="my source")
    with pytest.raises(ArchitectureError, match="my source"):
        Architecture.from_dict([1, 2], source="my source")


def test_constructor_validates():
    with pytest.raises(ArchitectureError, match="array_size"):
        Architecture(**{**VALID, "array_size": 1})
    with pytest.raises(ArchitectureError, match="data_type"):
        Architecture(**{**VALID, "data_type": "INT4"})


def test_architecture_is_immutable():
    arch = preset("pynqz1")
    with pytest.raises(AttributeError):
        arch.array_size = 4


# ------------------------------------------------------------------------ resolve / stem

def test_resolve_unknown_name_lists_presets_and_suggests():
    with pytest.raises(ArchitectureError) as info:
        resolve_arch("pynq1")
    msg = str(info.value)
    assert "did you mean 'pynqz1'" in msg
    for name in PRESETS:
        assert name in msg


def test_resolve_unrelated_name_lists_presets():
    with pytest.raises(ArchitectureError) as info:
        resolve_arch("qwertyuiop")
    assert "qwertyuiop" in str(info.value)
    for name in PRESETS:
        assert name in str(info.value)


def test_resolve_missing_path_raises(tmp_path):
    path = tmp_path / "missing.tarch"
    for spec in (path, str(path)):
        with pytest.raises(ArchitectureError) as info:
            resolve_arch(spec)
        assert str(path) in str(info.value)
    with pytest.raises(TcuError):
        resolve_arch("missing.tarch")


def test_resolve_file_path(tmp_path):
    path = write_tarch(tmp_path / "mine.tarch", with_changes(array_size=4))
    assert resolve_arch(path).array_size == 4
    assert resolve_arch(str(path)) == load_arch(path)


def test_resolve_returns_architecture_unchanged():
    arch = preset("cmoda7")
    assert resolve_arch(arch) is arch


def test_arch_stem(tmp_path):
    assert arch_stem("pynqz1") == "pynqz1"
    assert arch_stem(Path("/somewhere/my_board.tarch")) == "my_board"
    assert arch_stem("boards/zcu104.tarch") == "zcu104"
    path = write_tarch(tmp_path / "other.json", VALID)
    assert arch_stem(path) == "other"
    with pytest.raises(TypeError):
        arch_stem(preset("pynqz1"))


# ------------------------------------------------------------------------ options

def test_options_defaults():
    o = Options()
    assert o.axi_data_width == 64
    assert o.mem_impl == "bram"
    assert o.sample_block_size == 0
    assert o.decoder_timeout == 100
    assert o.reset_active_low is True
    assert o.chained_hazards is True
    assert o.weight_loader is True


@pytest.mark.parametrize("kwargs", [
    {"axi_data_width": 48},
    {"axi_data_width": 2048},
    {"axi_data_width": 16},
    {"axi_data_width": 0},
    {"axi_data_width": True},
    {"axi_data_width": "64"},
    {"mem_impl": "sram"},
    {"mem_impl": "BRAM"},
    {"sample_block_size": -1},
    {"sample_block_size": 65537},
    {"decoder_timeout": 0},
    {"decoder_timeout": 65536},
    {"chained_hazards": 1},
    {"chained_hazards": "no"},
    {"weight_loader": 0},
    {"weight_loader": None},
])
def test_options_bad_values(kwargs):
    with pytest.raises(OptionsError) as info:
        Options(**kwargs)
    assert isinstance(info.value, TcuError)
    assert repr(next(iter(kwargs.values()))) in str(info.value)


@pytest.mark.parametrize("kwargs", [
    {"axi_data_width": 32}, {"axi_data_width": 128}, {"axi_data_width": 1024},
    {"mem_impl": "uram"}, {"mem_impl": "regs"}, {"sample_block_size": 65536},
    {"decoder_timeout": 1}, {"decoder_timeout": 65535}, {"reset_active_low": False},
    {"chained_hazards": False}, {"weight_loader": False},
])
def test_options_good_values(kwargs):
    o = Options(**kwargs)
    for key, value in kwargs.items():
        assert getattr(o, key) == value


def test_check_for_cmoda7_axi_widths():
    cmoda7 = preset("cmoda7")                      # 4 x 16-bit = 64-bit vectors
    Options(axi_data_width=64).check_for(cmoda7)
    Options(axi_data_width=32).check_for(cmoda7)
    with pytest.raises(OptionsError) as info:
        Options(axi_data_width=128).check_for(cmoda7)
    msg = str(info.value)
    assert "128" in msg and "64-bit" in msg and "32, 64" in msg


def test_check_for_pynqz1_axi_widths():
    pynqz1 = preset("pynqz1")                      # 8 x 16-bit = 128-bit vectors
    for width in (32, 64, 128):
        Options(axi_data_width=width).check_for(pynqz1)
    with pytest.raises(OptionsError):
        Options(axi_data_width=256).check_for(pynqz1)


def test_check_for_refuses_float32():
    arch = Architecture(**{**VALID, "data_type": "FLOAT32"})
    with pytest.raises(TcuError, match="FLOAT32"):
        Options().check_for(arch)
    with pytest.raises(ArchitectureError):
        arch.require_hardware()


def test_bare_preset_name_wins_over_a_same_named_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Architecture.from_dict({**preset("cmoda7").to_dict()}).save(tmp_path / "pynqz1")
    assert resolve_arch("pynqz1") == preset("pynqz1")
    assert resolve_arch("./pynqz1") == preset("cmoda7")


def test_with_changes_validates_like_a_file():
    arch = preset("pynqz1").with_changes(data_type="FLOAT32", local_depth=1024)
    assert (arch.data_type, arch.local_depth, arch.array_size) == ("FLOAT32", 1024, 8)
    with pytest.raises(ArchitectureError, match=r"small: 2 problems:\n  - unknown key "
                                                r"'local_dept' \(did you mean 'local_depth'"):
        preset("pynqz1").with_changes("small", local_dept=3, array_size=0)


def test_a_key_given_twice_is_an_error(tmp_path):
    path = tmp_path / "twice.tarch"
    text = preset("cmoda7").to_json()
    path.write_text(text.replace('"array_size": 4,', '"array_size": 4, "array_size": 8,'))
    assert "key 'array_size' is given more than once" in load_error(path)


def test_differences_name_each_key_that_differs():
    a = preset("pynqz1")
    assert a.differences(a) == []
    b = a.with_changes(local_depth=1024, accumulator_depth=512)
    assert a.differences(b) == [f"accumulator_depth {a.accumulator_depth} vs 512",
                                f"local_depth {a.local_depth} vs 1024"]


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_has_its_boards_width(name):
    """A preset's board width carries its vectors in whole beats, the hardware takes it, and
    an architecture equal to the preset (as loaded from a .tmodel) gets it too."""
    arch = preset(name)
    width = BOARD_AXI_WIDTH[name]
    Options(axi_data_width=width).check_for(arch)
    assert board_axi_width(name) == width
    assert board_axi_width(name, 32) == 32                    # a width given wins
    assert beats_per_vector(arch, width) == arch.vector_bytes * 8 // width


def test_an_architecture_equal_to_a_preset_takes_its_boards_width():
    """By value (a .tmodel's architecture) or by file: the first preset it equals.
    artya7100t's file is pynqz1's architecture, so only its name gives Arty's 128."""
    assert board_axi_width(Architecture.from_dict(preset("zcu104").to_dict())) == 128
    assert board_axi_width(PRESET_DIR / "ultra96v2_int16.tarch") == 128
    assert board_axi_width(preset("artya7100t")) == 64
    assert board_axi_width("artya7100t") == 128


def test_other_architectures_take_the_widest_width_that_divides_a_vector():
    arch = preset("ultra96v2").with_changes("mine", local_depth=4096)
    assert board_axi_width(arch) == 128                       # 256-bit vectors
    small = preset("cmoda7").with_changes("mine", array_size=2)
    assert board_axi_width(small) == 32 and beats_per_vector(small, 32) == 1
    assert beats_per_vector(preset("zcu104"), 128) == 4
    odd = preset("cmoda7").with_changes("mine", array_size=3)    # 48-bit vectors
    assert board_axi_width(odd) == 32 and beats_per_vector(odd, 32) == 2
