"""Board constraints: one XDC per board with a clock on the top's `clock` port, and only
ports that the generated top has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tcu_hw.arch import Options, preset
from tcu_hw.top import port_list

CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints"


@pytest.mark.parametrize("board, period", [("pynqz1", 20.0), ("ultra96v2", 10.0),
                                           ("zcu104", 10.0), ("artya7100t", 40.0)])
def test_board_xdc(board, period):
    text = (CONSTRAINTS / f"{board}.xdc").read_text()
    clock = re.search(r"create_clock .*-period ([0-9.]+) \[get_ports clock\]", text)
    assert clock and float(clock.group(1)) == period
    ports = {name for name, *_ in port_list(preset(board), Options(axi_data_width=64))}
    assert set(re.findall(r"get_ports (\w+)", text)) <= ports


def test_ecp5_constraint_names_the_clock():
    assert 'FREQUENCY PORT "clock"' in (CONSTRAINTS / "ecp5" / "clock.lpf").read_text()
