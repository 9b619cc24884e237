"""The test suite's wall time, as README's test command runs it (issue 44: ≤ 6 min on a 2-core
AVX-512 machine, ≤ 10 min on a 2-core AVX2 one).

Runs ``python -m pytest -q --durations=25`` with ``CI=true`` (what ``.ci/run`` runs) in the
current environment, alone on the machine, and appends one row to ``docs/bench/test_suite.json``:
the wall time, pytest's counts, tests and seconds per file (from pytest's JUnit XML: setup, call
and teardown of each test), the 25 slowest phases and the machine (CPU, cores, SIMD level).
docs/results/test_suite.md shows the JSON (``python bench/results.py``); the generated part of
``docs/testing.md`` is rewritten from it (the first row against the latest, per file).

    python bench/test_suite.py                  # the whole suite, one row
    python bench/test_suite.py --label before   # a name for the row (e.g. the commit measured)

A number here is a measurement, never an assertion: the suite itself asserts no time.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from harness import describe, machine, md_table  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT_JSON = REPO / "docs" / "bench" / "test_suite.json"
TESTING_MD = REPO / "docs" / "testing.md"
NOTE = ("README's test command with CI=true, alone on the machine; files: tests and seconds per test file (setup, "
        "call and teardown, from pytest's JUnit XML); slowest: pytest's 25 slowest phases.")
"""What a row is (written into the JSON; docs/results/test_suite.md shows it)."""
BEGIN, END = "<!-- bench/test_suite.py: begin -->", "<!-- bench/test_suite.py: end -->"
"""docs/testing.md's generated part lies between these lines (the rest of the page is prose)."""


def file_of_case(classname: str) -> str:
    """The test file of a JUnit ``classname``, relative to tests/: ``tests.unit.core.test_io`` (or
    ``...test_io.TestX``) → ``unit/core/test_io.py`` (the tier folder first, docs/testing.md)."""
    parts = classname.split(".")
    if parts and parts[0] == "tests":
        parts = parts[1:]
    module = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    return "/".join(parts[:module + 1]) + ".py"


def per_file(junit: Path) -> dict[str, dict]:
    """``{file: {"tests", "seconds"}}`` from pytest's JUnit XML (seconds include fixtures); files
    relative to tests/ (rows before the tiers name the file alone: ``test_io.py``)."""
    out: dict[str, dict] = collections.defaultdict(lambda: {"tests": 0, "seconds": 0.0})
    for case in ET.parse(junit).iter("testcase"):
        name = file_of_case(case.get("classname", ""))
        out[name]["tests"] += 1
        out[name]["seconds"] = round(out[name]["seconds"] + float(case.get("time", 0.0)), 1)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["seconds"]))


def slowest(output: str) -> list[dict]:
    """The ``--durations`` lines of pytest's output: ``{"seconds", "phase", "test"}``."""
    rows = []
    for m in re.finditer(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+)$", output, re.M):
        rows.append({"seconds": float(m.group(1)), "phase": m.group(2), "test": m.group(3)})
    return rows


def write_testing_md(rows: list[dict]) -> None:
    """docs/testing.md between :data:`BEGIN` and :data:`END`: the first row (the suite before it
    was made fast) against the latest, per file, and the latest row's slowest phases."""
    if not TESTING_MD.exists() or BEGIN not in TESTING_MD.read_text(encoding="utf-8"):
        return
    first, last = rows[0], rows[-1]
    out = [BEGIN, "",
           f"Latest: **{last['wall_seconds']:.0f} s** ({last['summary']}), `{last['command']}` on "
           f"{describe(last['machine'])}, {last['date']}. Before: **{first['wall_seconds']:.0f} s** "
           f"({first['summary']}) on {describe(first['machine'])}, {first['date']}.", ""]
    # a file is matched by its name alone: the first row's files have no tier folder (unit/core/test_io.py
    # was test_io.py); a file split by tier since then is its parts, each with its own name
    before = {Path(f).name: v for f, v in first["files"].items()}
    now = {Path(f).name: (f, v) for f, v in last["files"].items()}
    names = sorted(set(before) | set(now), key=lambda f: (-(before.get(f, {}).get("seconds", 0.0)), f))
    per_file = [{"file": now[f][0] if f in now else f, "tests before": before.get(f, {}).get("tests"),
                 "tests now": now.get(f, ("", {}))[1].get("tests"),
                 "seconds before": before.get(f, {}).get("seconds"),
                 "seconds now": now.get(f, ("", {}))[1].get("seconds")} for f in names]
    out += md_table(per_file, ["file", "tests before", "tests now", "seconds before", "seconds now"])
    out += ["", f"The 25 slowest phases now (`--durations=25`, {last['date']}):", ""]
    out += md_table(last["slowest"], ["seconds", "phase", "test"]) + ["", END]
    text = TESTING_MD.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    TESTING_MD.write_text(head + "\n".join(out) + tail, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="", help="a name for the row (default: the date)")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (default: none, the whole suite)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "--durations=25", f"--junitxml={junit}", *args.pytest_args]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "CI": "true"}, capture_output=True, text=True)
        wall = time.perf_counter() - t
        sys.stdout.write(proc.stdout[-6000:])
        files = per_file(junit) if junit.exists() else {}
    summary = next((line.strip("= ") for line in reversed(proc.stdout.splitlines())
                    if " passed" in line or " failed" in line), "")
    row = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ"), "label": args.label,
           "command": "CI=true python -m pytest -q --durations=25" + "".join(f" {a}" for a in args.pytest_args),
           "exit_code": proc.returncode, "wall_seconds": round(wall, 1), "summary": summary,
           "n_tests": sum(v["tests"] for v in files.values()), "files": files, "slowest": slowest(proc.stdout),
           "machine": machine()}
    data = json.loads(OUT_JSON.read_text()) if OUT_JSON.exists() else {}
    data = {"rows": data} if isinstance(data, list) else data  # a bare list of rows before the note
    rows = data.get("rows", []) + [row]
    OUT_JSON.write_text(json.dumps({**data, "note": NOTE, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    write_testing_md(rows)
    print(f"{wall:.0f} s, {summary}: {OUT_JSON}")
    return proc.returncode


run = main
"""The entry of ``python -m bench test_suite`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
