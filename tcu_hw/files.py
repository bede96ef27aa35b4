"""Reading and writing files with errors that name the file and say what it should be."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import TcuError


def read_bytes(path, what: str, error: type[TcuError]) -> bytes:
    """The bytes of ``path``, or ``error`` naming the file and what it should have been."""
    path = Path(path)
    try:
        return path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read {what}: {e.strerror}") from None


def read_text(path, what: str, error: type[TcuError]) -> str:
    """The UTF-8 text of ``path``, or ``error``."""
    data = read_bytes(path, what, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{Path(path)}: not a text file (expected a {what})") from None


def read_json(path, what: str, error: type[TcuError]):
    """The parsed JSON of ``path``, or ``error`` with the line and column of a syntax error."""
    text = read_text(path, what, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{Path(path)}: not valid JSON: {e.msg} at line {e.lineno} "
                    f"column {e.colno}") from None


def write_atomic(path, data: bytes | str) -> None:
    """Write a whole file or nothing: a temporary file next to it, then a rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(data, str):
            tmp.write_text(data)
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
