"""Formal proofs of the generated top (``sim.formal``, SymbiYosys): every property passes on the
design and fails on its broken variant; the harness follows the top's port list; each
mutation applies exactly once."""

from __future__ import annotations

import re

import pytest

from sim.formal import (ARCHS, LEMMA, MORE_MUTATIONS, MUTATIONS, PROPERTIES, FormalError,
                        check, check_all, design_text, harness, main, tools_missing,
                        wire_width)
from tcu_hw.top import port_list
from tcu_hw.verilog import verilog

MISSING = tools_missing()
requires_sby = pytest.mark.skipif(MISSING is not None,
                                  reason=f"needs SymbiYosys and a solver: {MISSING}")
SBY = [name for name, p in PROPERTIES.items() if p.kind == "sby"]


_DESIGNS: dict = {}


def _design(arch: str) -> str:
    if arch not in _DESIGNS:
        _DESIGNS[arch] = design_text(ARCHS[arch])
    return _DESIGNS[arch]


@pytest.fixture
def design_2x2():
    return _design("2x2")


def test_every_property_has_a_broken_variant():
    assert set(MUTATIONS) == set(PROPERTIES)
    for p in PROPERTIES.values():
        assert set(p.depth) == set(ARCHS)
        if p.kind == "sby":
            assert p.broken_depth > 0 and set(p.cover_depth) == set(ARCHS)


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_applies_once_and_refuses_a_missing_anchor(name, design_2x2):
    fa = ARCHS["2x2"]
    mutated = MUTATIONS[name].apply(design_2x2, fa.module)
    assert mutated != design_2x2
    # the anchors are named wires (or, for the 4 KiB and 256-beat limits, DRAM0's expression)
    anchor = {"valid_held": "assign dram0_ar_valid", "payload_stable": "assign dram0_ar_addr",
              "no_ready_path": "assign dram0_aw_valid", "wlast": "assign dram0_w_last",
              "boundary_4k": "dram0_axi_addr[11:0]", "burst_len": "'d256",
              "stream": "assign axis_words_ready", "progress": "assign dram0_ar_valid"}[name]
    with pytest.raises(FormalError, match="mutation"):
        MUTATIONS[name].apply(design_2x2.replace(anchor, anchor.replace("d", "D")), fa.module)


def test_rams_are_free_and_keep_their_ports(design_2x2):
    fa = ARCHS["2x2"]
    plain = verilog(fa.arch, fa.options, fa.module[len("top_"):])
    for kind in ("tdp", "sdp"):
        header = re.search(rf"module {fa.module}_ram_{kind}\b.*?\);", plain, re.S).group(0)
        body = design_2x2[design_2x2.index(f"module {fa.module}_ram_{kind}"):]
        body = body[:body.index("endmodule")]
        assert body.startswith(header)
        assert "mem[" not in body and "(* anyseq *)" in body
    assert design_2x2.replace(" ", "").count("_ram_") == plain.replace(" ", "").count("_ram_")


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("name", SBY)
def test_harness_drives_every_input_and_observes_real_wires(name, arch):
    fa = ARCHS[arch]
    design = _design(arch)
    text, probes = harness(fa, PROPERTIES[name], design)
    ports = port_list(fa.arch, fa.options)
    for port, direction, width, _ in ports:
        assert f".{port}({port})" in text                      # connected by name
        if direction == "input" and port != "clock":
            assert re.search(rf"^\s*assign {port} = ", text, re.M), port
    for wire, width in probes.items():
        assert wire_width(design, wire) == width
        assert f"probe_{wire}" in text
    lean, lean_probes = harness(fa, PROPERTIES[name], design, lemmas=False)
    assert not any(LEMMA.match(line) for line in lean.splitlines())
    assert set(lean_probes) <= set(probes)


def test_cli_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["-p", "bogus"])
    assert "unknown property bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["-a", "3x3"])
    assert "unknown architecture 3x3" in capsys.readouterr().err
    assert main(["-p", "valid_held", "--depth", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_check_rejects_unknown_names():
    with pytest.raises(FormalError, match="unknown property"):
        check("nope")
    with pytest.raises(FormalError, match="unknown formal architecture"):
        check("wlast", "8x8")


# ------------------------------------------------------------------------------------------
# The proofs (2×2 in the default tier; 4×4, the covers and another solver in the slow tier)


def _fast(arch: str) -> list[str]:
    return [name for name, p in PROPERTIES.items() if arch in p.fast_archs]


@requires_sby
@pytest.mark.parametrize("name", _fast("2x2"))
def test_property_holds_on_2x2(name):
    r = check(name, "2x2")
    assert r.status == "PASS", r.detail
    assert r.mode == PROPERTIES[name].mode


@requires_sby
@pytest.mark.parametrize("name", list(PROPERTIES))
def test_broken_variant_fails(name):
    (r,) = check_all([name], ["2x2"], broken=True)
    assert r.status == "FAIL", r.detail
    # the property itself fails (BMC checks no helper lemma), on the mutated port
    first = {"no_ready_path": "READY→VALID path from m_axi_dram0_awready",
             "stream": "stream_byte", "progress": "progress"}.get(name, "d0_")
    assert r.detail.startswith(first), r.detail
    assert "lemma" not in r.detail and "env_" not in r.detail


@requires_sby
def test_payload_stable_catches_w_data_that_moves():
    """W data is cut from the write skid in place: a WDATA bit that flips while WVALID waits
    fails payload_stable on W itself (BMC at the property's broken depth, no lemmas)."""
    m = MORE_MUTATIONS["payload_stable_w"]
    (r,) = check_all([m.property], ["2x2"], broken=True, mutation=m)
    assert r.status == "FAIL" and r.detail.startswith("d0_w_stable"), r.detail
    with pytest.raises(FormalError, match="mutation for payload_stable given to wlast"):
        check("wlast", "2x2", broken=True, mutation=m)


@requires_sby
def test_progress_bound_is_tight():
    """One cycle less than the stated bound (same window for the stream's words), and the
    check finds a program still running: the bound is the worst case, not a guess."""
    p = PROPERTIES["progress"]
    n = p.bound["2x2"] - 1
    r = check("progress", "2x2", bound=n, depth=p.depth["2x2"] - 1)
    assert r.status == "FAIL" and r.detail.startswith("progress"), r.detail


@pytest.mark.slow
@requires_sby
@pytest.mark.parametrize("name", list(PROPERTIES))
def test_property_holds_on_4x4(name):
    r = check(name, "4x4")
    assert r.status == "PASS", r.detail


@pytest.mark.slow
@requires_sby
@pytest.mark.parametrize("name", SBY)
def test_covers_are_reached(name):
    """Not vacuous: each property's interesting cases (VALID waiting, multi-beat bursts and W
    ahead of AW, a burst cut at 4 KiB, a 256-beat burst, back-pressure on the stream, an
    instruction still busy one cycle before the progress bound) happen within the depth."""
    r = check(name, "2x2", mode="cover", depth=PROPERTIES[name].cover_depth["2x2"])
    assert r.status == "PASS", r.detail
    assert r.detail.startswith("reached: ")


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["boolector"])
def test_another_solver_from_pypi(solver):
    missing = tools_missing(solver)
    if missing:
        pytest.skip(missing)
    r = check("valid_held", "2x2", solver=solver)
    assert r.status == "PASS", r.detail
