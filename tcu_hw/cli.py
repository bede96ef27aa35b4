"""Argument types shared by the command-line tools (``type=`` functions for argparse).

Used by ``python -m tcu_hw.gen`` and ``python -m compiler_lite`` (Tensil-style ``-s true``
flags) and by ``python -m sim.run`` and ``python -m sim.check`` (waveform windows). Each
raises :class:`argparse.ArgumentTypeError` with a message naming what was expected, which
argparse prints after the option's name. The wrapper that runs a command and prints user
errors is :func:`tcu_hw.errors.run_cli`.
"""

from __future__ import annotations

import argparse


def boolean(text: str) -> bool:
    """``true``/``yes``/``1``/``on`` or ``false``/``no``/``0``/``off``, in any case."""
    t = text.lower()
    if t in ("true", "yes", "1", "on"):
        return True
    if t in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def pc_window(text: str) -> tuple[int, int]:
    """``PC_FROM:PC_TO`` (integers such as ``12`` or ``0x1f``, ``0 <= PC_FROM <= PC_TO``) →
    the program-counter window ``(PC_FROM, PC_TO)``, both included."""
    try:
        a, b = (int(v, 0) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PC_FROM:PC_TO, got {text!r}") from None
    if a < 0 or b < a:
        raise argparse.ArgumentTypeError(f"window {text!r} must have 0 <= PC_FROM <= PC_TO")
    return a, b


def pc_around(text: str) -> tuple[int, int]:
    """``PC[:RADIUS]`` → the program-counter window PC-RADIUS .. PC+RADIUS (radius 4 by
    default; the window starts at 0 at the earliest)."""
    try:
        pc, _, r = text.partition(":")
        pc, r = int(pc, 0), int(r, 0) if r else 4
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PC[:RADIUS], got {text!r}") from None
    if pc < 0 or r < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: PC and RADIUS must be >= 0")
    return max(0, pc - r), pc + r
