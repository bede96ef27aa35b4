"""tcu_hw.progress: drawn on a terminal, silent in logs and under -q."""

from __future__ import annotations

import io

from tcu_hw.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def use(progress: Progress) -> None:
    with progress.step("building the model"):
        pass
    with progress.stages() as say:
        say("loading")
        say("lowering")
    with progress.bar("simulating", total=10, unit="instructions") as update:
        update(4)
        update(10)


def test_a_terminal_sees_each_step_with_its_time():
    out = Terminal()
    use(Progress(stream=out))
    text = out.getvalue()
    for line in ("building the model ... ", "loading ... ", "lowering ... ",
                 "simulating ... 10 instructions"):
        assert line in text, text


def test_logs_and_quiet_get_nothing():
    log = io.StringIO()                      # not a terminal
    use(Progress(stream=log))
    assert log.getvalue() == ""
    out = Terminal()
    use(Progress(quiet=True, stream=out))
    assert out.getvalue() == ""
