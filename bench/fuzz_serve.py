"""The long fuzz run of `preqrag serve` with schemathesis (issue 25; the short one is
tests/e2e/test_serve.py::test_api_fuzzed_by_schemathesis).

    python bench/fuzz_serve.py --index IDX [--config CFG] --max-examples 100 -o docs/bench/fuzz_serve.json

Starts ``python -m preqrag.cli serve --index IDX`` on a free 127.0.0.1 port (localhost only),
waits for ``/healthz``, runs ``schemathesis run http://127.0.0.1:PORT/openapi.json`` with its
default checks (no 5xx; responses match the declared schemas; schema-valid requests accepted
and schema-violating ones refused; ...), bounded by ``--max-examples`` per operation and
``--max-seconds`` in all, then checks that the server still answers. Records the counts
(generated cases, failures by check), the summary lines, the wall time, the command, the
machine and the date. Exit status 0 when no issue was found and the server is alive.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import machine  # noqa: E402
from harness import free_port, http_get, wait_ready  # noqa: E402

from preqrag.core.io import atomic_write_text  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--max-examples", type=int, default=100)
    ap.add_argument("--max-seconds", type=int, default=3600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="fuzz_serve_", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "preqrag.cli", "serve", "--index", str(args.index), "--port", str(port)]
    if args.config:
        cmd += ["--config", str(args.config)]
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(server, url, log.name)
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            r = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run", f"{url}/openapi.json",
                                "--max-examples", str(args.max_examples), "--seed", str(args.seed),
                                "--request-timeout", "600", "--no-color"],
                               capture_output=True, text=True, timeout=args.max_seconds, cwd=work)
        wall = time.perf_counter() - t
        alive = server.poll() is None and http_get(f"{url}/healthz") == 200
    finally:
        server.terminate()
        server.wait(timeout=60)
    out = r.stdout
    generated = re.search(r"(\d+) generated", out)
    failures = dict((name.strip(), int(n)) for name, n in re.findall(r"❌ (ST\d+ [^:\n]+): (\d+)", out))
    summary = out[out.rfind("SUMMARY"):] if "SUMMARY" in out else out[-2000:]
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": "python bench/fuzz_serve.py --index IDX" + (" --config CFG" if args.config else "")
                   + f" --max-examples {args.max_examples} --seed {args.seed} -o {args.out}",
        "schemathesis_exit": r.returncode, "generated": int(generated.group(1)) if generated else None,
        "failures": failures, "no_issues": "No issues found" in out, "server_alive_after": alive,
        "wall_s": round(wall, 1), "summary": [line for line in summary.splitlines() if line.strip()][:40],
    }
    atomic_write_text(args.out, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0 if result["no_issues"] and alive else 1


run = main
"""The entry of ``python -m bench fuzz_serve`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
