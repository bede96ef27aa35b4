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

    def unique(pairs):
        keys = [k for k, _ in pairs]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise error(f"{Path(path)}: key {twice[0]!r} is given more than once")
        return dict(pairs)
    try:
        return json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as e:
        raise error(f"{Path(path)}: not valid JSON: {e.msg} at line {e.lineno} "
                    f"column {e.colno}") from None


def write_atomic(path, data: bytes | str, error: type[TcuError] = TcuError) -> None:
    """Write a whole file or nothing: a temporary file next to it, then a rename. A file
    system that refuses (no such directory, read-only, full disk) raises ``error`` naming
    ``path``, and leaves no file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(data, str):
            tmp.write_text(data)
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        raise error(f"{path}: cannot write it: {e.strerror or e}") from None
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def check_writable(path, flag: str, error: type[TcuError]) -> None:
    """Refuse, before any work is done, an output file that cannot be written: its directory
    is missing or ``path`` is a directory. ``flag`` names the option in the message."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{flag} {path}: is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise error(f"{flag} {path}: directory {parent} does not exist")


def write_all_atomic(target, files: dict, error: type[TcuError]) -> list[Path]:
    """Write every file of ``files`` ({name: bytes or str}) into directory ``target``
    (created if needed), or none: all go to temporary names first and are renamed only when
    every one is written and no destination is in the way. Returns the paths."""
    target = Path(target)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise error(f"{target}: cannot create the target directory: {e.strerror}") from None
    in_the_way = [name for name in files if (target / name).is_dir()]
    if in_the_way:
        raise error(f"{target}: cannot write {', '.join(in_the_way)}: a directory of that "
                    f"name is in the way")
    done = []
    try:
        for name, data in files.items():
            tmp = target / f".{name}.tmp{os.getpid()}"
            done.append((tmp, target / name))
            tmp.write_bytes(data.encode() if isinstance(data, str) else data)
        for tmp, path in done:
            os.replace(tmp, path)
    except OSError as e:
        raise error(f"{target}: cannot write the output files: {e.strerror}") from None
    finally:
        for tmp, _ in done:
            tmp.unlink(missing_ok=True)
    return [path for _, path in done]
