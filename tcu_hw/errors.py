"""User-facing errors of tcu_hw, compiler_lite and sim, and the CLI wrapper that prints them.

Every error that bad input can cause is a :class:`TcuError` whose message names the file, the
key or field, and what is allowed. Command-line entry points catch :class:`TcuError` and print
its message (no traceback); anything else is a bug.
"""

from __future__ import annotations


class TcuError(Exception):
    """Base class: a clear, complete message for the user; never a bug in this code."""


class ArchitectureError(TcuError, ValueError):
    """A `.tarch` file or architecture object is invalid (missing, unknown or bad key)."""


class OptionsError(TcuError, ValueError):
    """Implementation options (AXI width, memory implementation, ...) are invalid."""


class EncodingError(TcuError, ValueError):
    """An instruction field does not fit the layout, or bytes do not decode."""


class AssemblyError(TcuError, ValueError):
    """Assembly text that does not parse; the message names the line."""


class ArtifactError(TcuError, ValueError):
    """A `.tmodel`, `.tprog`, `.tdata` or CSV file is missing, malformed or inconsistent."""


class CompileError(TcuError, ValueError):
    """An ONNX model that compiler_lite cannot compile as asked: unreadable, unsupported nodes,
    a wrong output name or input shape, or a model too large for the architecture's memories."""



def run_cli(parser, action, argv=None) -> int:
    """Parse ``argv`` with ``parser`` and run ``action(args)``; a :class:`TcuError` becomes one
    ``error: ...`` line on standard error and exit status 2 (never a traceback)."""
    import sys
    args = parser.parse_args(argv)
    try:
        return action(args)
    except TcuError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:                 # e.g. piped into `head`
        return 0
