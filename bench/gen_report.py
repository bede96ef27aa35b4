"""Generation time and Verilog size per preset board (``python -m tcu_hw.gen``).

    python bench/gen_report.py [--boards pynqz1,ultra96v2,...]

Not a test.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOARDS = {"pynqz1": 64, "artya7100t": 64, "cmoda7": 64, "ultra96v2": 128, "zcu104": 128,
          "zcu104_uram": 512}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default=",".join(BOARDS))
    args = parser.parse_args()
    print(f"{'board':<12} {'AXI':>4} {'seconds':>8} {'Verilog bytes':>14} {'lines':>8}")
    for board in args.boards.split(","):
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tcu_hw.gen", "-a", board, "-d",
                            str(BOARDS[board]), "-t", d], check=True, capture_output=True)
            seconds = time.perf_counter() - t
            v = (Path(d) / f"top_{board}.v").read_text()
            print(f"{board:<12} {BOARDS[board]:>4} {seconds:>8.1f} {len(v):>14,} "
                  f"{v.count(chr(10)):>8,}")


if __name__ == "__main__":
    main()
