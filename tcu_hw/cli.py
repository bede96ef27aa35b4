"""What the command-line tools share: their common flags and argument types.

The flags every tool spells the same way (:data:`SHARED_FLAGS`, added by the ``add_*``
functions): ``-a/--arch``, ``-m/--model``, ``-i/--inputs``, ``-t/--target-dir``,
``-d/--axi-data-width``, ``-q/--quiet``. ``-o`` names output tensors when compiling (as in
Tensil's compiler) and output files when running.

The ``type=`` functions (Tensil-style ``-s true`` flags, waveform windows) raise
:class:`argparse.ArgumentTypeError` with a message naming what was expected, which argparse
prints after the option's name. The wrapper that runs a command and prints user errors is
:func:`tcu_hw.errors.run_cli`.
"""

from __future__ import annotations

import argparse

#: long flag → short flag, the same in every tool that has it
SHARED_FLAGS = {"--arch": "-a", "--model": "-m", "--inputs": "-i", "--target-dir": "-t",
                "--axi-data-width": "-d", "--quiet": "-q"}


def plain(text: str) -> str:
    """Docstring text as plain text for ``--help``: ``:role:`x``` and ````x```` become x (a
    leading ``~`` dropped)."""
    import re
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def add_arch(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """``-a/--arch``: a .tarch file or a preset (required unless ``default``)."""
    from .arch import PRESETS
    p.add_argument("-a", "--arch", required=default is None, default=default, metavar="ARCH",
                   help=f"a .tarch file or a preset ({', '.join(PRESETS)})"
                        + (f"; default {default}" if default else ""))


def add_model(p: argparse.ArgumentParser, suffix: str, what: str) -> None:
    """``-m/--model`` (required), e.g. ``suffix=".onnx"``."""
    p.add_argument("-m", "--model", required=True, metavar=f"MODEL{suffix}", help=what)


def add_inputs(p: argparse.ArgumentParser, metavar: str, what: str,
               required: bool = False, aliases: tuple[str, ...] = ()) -> None:
    """``-i/--inputs``: the input values of a run (files)."""
    p.add_argument("-i", "--inputs", *aliases, required=required, metavar=metavar, help=what,
                   type=_not_a_shape)


def add_target_dir(p: argparse.ArgumentParser, what: str, default: str | None = None,
                   aliases: tuple[str, ...] = ()) -> None:
    """``-t/--target-dir``: the directory the tool writes into."""
    p.add_argument("-t", "--target-dir", *aliases, dest="target_dir", default=default,
                   metavar="DIR", help=what)


def add_axi_width(p: argparse.ArgumentParser, what: str, default: int | None = None,
                  aliases: tuple[str, ...] = ()) -> None:
    """``-d/--axi-data-width`` in bits."""
    p.add_argument("-d", "--axi-data-width", *aliases, dest="axi_data_width", type=int,
                   default=default, metavar="BITS", help=what)


def add_quiet(p: argparse.ArgumentParser, what: str) -> None:
    """``-q/--quiet``."""
    p.add_argument("-q", "--quiet", action="store_true", help=what)


def add_input_shapes(p: argparse.ArgumentParser) -> None:
    """``--input-shapes "NAME [d0,d1,...]"`` (repeatable) for models with dynamic dims."""
    p.add_argument("--input-shapes", action="append", metavar='"NAME [d0,d1,...]"',
                   help="shape of an input with dynamic dimensions (repeat, or separate "
                        "with ;)")


def _not_a_shape(text: str) -> str:
    """An ``-i`` value: refuse a shape (``-i`` once gave input shapes to the compilers)."""
    name, _, rest = text.strip().partition(" ")
    if rest.strip().startswith("[") and rest.strip().endswith("]"):
        raise argparse.ArgumentTypeError(
            f"{text!r} looks like an input shape: give shapes with --input-shapes "
            f"'{text.strip()}' (-i/--inputs takes input files)")
    return text


def positive(text: str) -> int:
    """A whole number >= 1 (counts such as ``--samples``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


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
