"""Every bench script still starts: its ``--help`` runs (imports, argument parser) without error.

The bench scripts measure what docs/bench/*.json holds and are too slow for the suite; this keeps
them from rotting silently (a renamed function, a moved module). One subprocess runs them all with
``runpy`` (the script's folder on ``sys.path``, as ``python bench/x.py`` has it), so the imports
are paid once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO as ROOT

SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))

RUNNER = r"""
import contextlib, io, json, runpy, sys, traceback
bench, scripts = sys.argv[1], sys.argv[2:]
sys.path.insert(0, bench)
failed = {}
for path in scripts:
    out = io.StringIO()
    sys.argv = [path, "--help"]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        failed[path] = "returned without printing its usage"
    except SystemExit as e:
        if e.code not in (0, None) or "usage:" not in out.getvalue():
            failed[path] = f"exit {e.code!r}: {out.getvalue()[-300:]}"
    except BaseException:
        failed[path] = traceback.format_exc()[-1500:]
print(json.dumps(failed))
"""


def test_every_bench_script_prints_its_usage():
    assert len(SCRIPTS) >= 30
    r = subprocess.run([sys.executable, "-c", RUNNER, str(ROOT / "bench"), *map(str, SCRIPTS)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    failed = json.loads(r.stdout.strip().splitlines()[-1])
    assert not failed, "\n\n".join(f"{Path(k).name}: {v}" for k, v in failed.items())
