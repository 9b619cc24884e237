"""Peak memory of the exact (flat) dense index build at scale (issue 24's 5M target: <= 6 GB).

    python bench/flat_peak.py --passages 5000000 --dim 256 --workdir WORK -o docs/bench/flat_peak.json

1. Writes ``--passages`` random unit vectors (float32, seed 0) as a build leaves them: files
   ``emb_00000.npy``, ... of :data:`preqrag.index.embedded.SHARD` rows each. The flat build's memory
   does not depend on the vectors' values, so random vectors stand in for encoded passages
   (dim 256: WordLlama's, as in the 5M rows of docs/results/scale.md).
2. In a child process (its own peak RSS: ``VmHWM``, bench/harness.py's ``peak_mb``; rows before
   2026-11-26 recorded ``ru_maxrss``, an upper bound of it), builds the index exactly as
   ``preqrag index`` does: :func:`preqrag.retrieval.dense.build_faiss` with the default
   ``[index]`` settings (flat), from the list of vector files.
3. Checks the result with FAISS itself: ``faiss.read_index`` (memory-mapped) has ``ntotal`` rows
   and rows 0, n/2 and n-1 equal the vectors written.

Reported: passages, dim, index bytes, build seconds, the child's peak RSS (MB), the check.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from harness import command, machine  # noqa: E402
from harness import peak_mb  # noqa: E402


def write_vectors(out: Path, n: int, dim: int, rows: int) -> list[Path]:
    """``n`` random unit vectors in files of ``rows`` rows; returns the files in order."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    files = []
    for i, lo in enumerate(range(0, n, rows)):
        v = rng.standard_normal((min(rows, n - lo), dim), dtype=np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        f = out / f"emb_{i:05d}.npy"
        np.save(f, v)
        files.append(f)
    return files


def child(vectors: str, out: str) -> None:
    """Child: the production flat build from the vector files; prints JSON with its peak RSS."""
    from preqrag.retrieval.dense import build_faiss

    files = sorted(Path(vectors).glob("emb_*.npy"))
    t = time.perf_counter()
    info = build_faiss(files, out)
    seconds = time.perf_counter() - t
    print(json.dumps({"info": info, "seconds": round(seconds, 1),
                      "peak_rss_mb": peak_mb()}))


def check(index_path: Path, vectors: Path, n: int) -> dict:
    """FAISS reads the file back (mmap): ``ntotal`` and three rows against the vector files."""
    import faiss

    from preqrag.index.embedded import SHARD

    index = faiss.read_index(str(index_path), faiss.IO_FLAG_MMAP)
    same = []
    for row in (0, n // 2, n - 1):
        want = np.load(vectors / f"emb_{row // SHARD:05d}.npy")[row % SHARD]
        same.append(bool(np.array_equal(index.reconstruct(row), want)))
    return {"ntotal": int(index.ntotal), "rows_equal": same, "ok": index.ntotal == n and all(same)}


def main(argv=None) -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=5_000_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)

    from preqrag.index.embedded import SHARD
    from preqrag.core.io import atomic_write_text

    vectors = args.workdir / "vectors"
    t = time.perf_counter()
    files = write_vectors(vectors, args.passages, args.dim, SHARD)
    write_s = time.perf_counter() - t
    index_path = args.workdir / "dense.faiss"
    p = subprocess.run([sys.executable, __file__, "_child", str(vectors), str(index_path)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"build failed:\n{p.stderr[-3000:]}")
    built = json.loads(p.stdout.strip().splitlines()[-1])
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": command("flat_peak", argv),
        "passages": args.passages, "dim": args.dim, "vector_files": len(files),
        "rows_per_file": SHARD, "vectors_write_seconds": round(write_s, 1),
        "index_bytes": index_path.stat().st_size, "build_seconds": built["seconds"],
        "build_peak_rss_mb": built["peak_rss_mb"], "factory": built["info"]["factory"],
        "check": check(index_path, vectors, args.passages),
        "target_mb": 6000,
    }
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["check"]["ok"] else 1


run = main
"""The entry of ``python -m bench flat_peak`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
