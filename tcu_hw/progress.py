"""Progress of long work on a terminal, nothing in logs: the one way the tools show it.

A :class:`Progress` shows each step (a Verilator build, a PyRTL compile, a synthesis, a
compiler pass) as a spinner while it runs and leaves one line with its time when it ends; a
long simulation gets a bar of cycles or runs. It draws only when standard error is a
terminal and the tool was not given ``-q``: redirected to a file or a CI log, it writes
nothing, so logs hold only results and errors. Drawing is done by ``rich``.

    progress = Progress(quiet=args.quiet)
    with progress.step("building the Verilator model"):
        top = VerilatorTop(arch)
    with progress.bar("simulating", total=instructions, unit="instructions") as update:
        update(1000)        # done so far
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator


class Progress:
    """Spinners for steps and bars for counts on standard error (see the module docstring).

    Args:
        quiet: draw nothing (``-q``).
        stream: where to draw (default standard error); nothing is drawn unless it is a
            terminal.
    """

    def __init__(self, quiet: bool = False, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = not quiet and bool(getattr(self.stream, "isatty", lambda: False)())
        self._console = None

    @property
    def console(self):
        if self._console is None:
            from rich.console import Console
            self._console = Console(file=self.stream, highlight=False)
        return self._console

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        """A spinner with ``what`` while the block runs, then ``what ... 1.2 s``."""
        if not self.enabled:
            yield
            return
        t0 = time.perf_counter()
        with self.console.status(what):
            yield
        self.console.print(f"{what} ... {time.perf_counter() - t0:.1f} s")

    @contextmanager
    def stages(self) -> Iterator[Callable[[str], None]]:
        """One spinner for a sequence of stages: each call of the yielded function ends the
        stage before (its line with its time) and shows the new one."""
        if not self.enabled:
            yield lambda what: None
            return
        current: list = []

        def finish() -> None:
            if current:
                what, t0 = current.pop()
                self.console.print(f"{what} ... {time.perf_counter() - t0:.1f} s")

        with self.console.status("") as status:
            def say(what: str) -> None:
                finish()
                current.append((what, time.perf_counter()))
                status.update(what)
            yield say
        finish()

    @contextmanager
    def bar(self, what: str, total: float | None = None, unit: str = ""
            ) -> Iterator[Callable[..., None]]:
        """A bar (or a counter without ``total``); the block calls the yielded function
        with the amount done so far (and, optionally, a new total)."""
        if not self.enabled:
            yield lambda done, total=None: None
            return
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar,
                                   SpinnerColumn, TextColumn, TimeElapsedColumn)
        columns = [SpinnerColumn(), TextColumn(what), BarColumn(), MofNCompleteColumn(),
                   TextColumn(unit), TimeElapsedColumn()]
        with Bar(*columns, console=self.console, transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda done, total=None: bar.update(task, completed=done, total=total)
            done = bar.tasks[0].completed
        self.console.print(f"{what} ... {done:,.0f} {unit}".rstrip())

    def note(self, text: str) -> None:
        """A line of progress (shown only where a spinner would be)."""
        if self.enabled:
            self.console.print(text)
