"""The streaming BM25 build alone, on a passages file: wall seconds and peak memory.

Usage:
  python bench/bm25_build.py PASSAGES.parquet OUT_DIR [--json docs/bench/bm25_build.json]

Runs :func:`preqrag.retrieval.bm25.build_bm25` over the ``text`` column (default BM25 settings) and
reports its seconds, the process's peak resident memory (``ru_maxrss``: what a build is charged for,
file-backed mapped pages included) and the peak anonymous memory (``RssAnon`` sampled every 0.5 s),
the vocabulary and entry counts and the index size on disk. Rows merge into ``--json`` by
passage count.
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import sys
import threading
import time
from pathlib import Path

from harness import command, machine  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("passages")
    ap.add_argument("out")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from preqrag.core.config import BM25Config
    from preqrag.core.io import atomic_write_text
    from preqrag.retrieval.bm25 import build_bm25, parquet_texts

    peak_anon = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.5):
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    peak_anon[0] = max(peak_anon[0], int(line.split()[1]))

    threading.Thread(target=sample, daemon=True).start()
    t = time.perf_counter()
    info = build_bm25(parquet_texts(args.passages), BM25Config(), args.out)
    seconds = time.perf_counter() - t
    done.set()
    row = {**info, "seconds": round(seconds, 1),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "peak_rss_anon_mb": round(peak_anon[0] / 1024, 1),
           "disk_mb": round(sum(f.stat().st_size for f in Path(args.out).iterdir()) / 2**20, 1),
           "machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": command("bm25_build", argv, paths=False)}
    print(json.dumps(row))
    if args.json:
        out = Path(args.json)
        data = json.loads(out.read_text()) if out.exists() else {"rows": []}
        data["rows"] = [r for r in data["rows"] if r["passages"] != row["passages"]] + [row]
        atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench bm25_build`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
