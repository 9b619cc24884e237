"""`preqrag index` killed with SIGKILL at random points, then resumed (issue 25).

One uninterrupted reference build, then ``--kills`` trials. Each trial starts the same
command on a fresh target, waits until the build reaches the trial's phase (read from the
work directory ``IDX.partial``, see :func:`phase`), sleeps a random fraction of that phase's
reference duration, sends SIGKILL, records the phase the build was actually in, and runs the
same command again to completion. The resumed index must equal the reference: every data file
with the same SHA-256 (``manifest.json``'s ``files`` records; the manifest itself holds
timings, so it differs), and ``preqrag index --verify`` must pass.

Phases are taken in turn (chunking, BM25, encoding), so ``--kills 12`` gives four kills in each.
Encoding is checkpointed in shards of ``--shard-rows`` passages (the production default is 2048;
smaller here so a few hundred documents give several shards, the command sets
``preqrag.index.embedded.SHARD`` before calling the CLI); the reference uses the same value.

    python bench/kill_build.py --corpus ../shared/liverag-bench/corpus.jsonl.gz --docs 300 \\
        --kills 12 --workdir WORK -o docs/bench/kill_build.json

Uses the default configuration (all-MiniLM-L6-v2, flat FAISS) unless ``--config``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import corpus_head, machine  # noqa: E402

from preqrag.core.io import atomic_write_text  # noqa: E402

PHASES = ("chunking", "bm25", "encoding")
ORDER = ("start", *PHASES, "faiss", "done")
POLL_S = 0.005

LAUNCH = ("import sys, preqrag.index.embedded as ix; ix.SHARD = int(sys.argv.pop(1)); "
          "from preqrag.cli.app import main; sys.argv[0] = 'preqrag'; main()")
"""``python -c LAUNCH ROWS index ...``: the CLI with the embedding shard size set."""


def phase(target: Path) -> str:
    """The build's phase, read from its work directory (``preqrag.index.embedded.build_index``'s files):
    ``start`` (hashing the corpus, loading the embedder), ``chunking`` (passages Parquet and
    the passage store), ``bm25`` (``bm25.work``), ``encoding`` (embedding shards), ``faiss``
    (``dense.faiss.tmp``), ``done`` (published)."""
    partial = target.with_name(target.name + ".partial")
    if target.exists() and not partial.exists():
        return "done"
    if not partial.exists():
        return "start"
    if (partial / "dense.faiss.tmp").exists() or (partial / "dense.faiss").exists():
        return "faiss"
    if (partial / "bm25").exists() and not (partial / "bm25.work").exists():
        return "encoding"
    if (partial / "bm25.work").exists() or (partial / "passages.lookup.npy").exists():
        return "bm25"
    return "chunking"


def command(corpus: Path, target: Path, shard_rows: int, config: Path | None) -> list[str]:
    cmd = [sys.executable, "-c", LAUNCH, str(shard_rows), "index", "--corpus", str(corpus), "--index", str(target)]
    return cmd + (["--config", str(config)] if config else [])


def data_files(index: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of the index's data files, from its manifest."""
    files = json.loads((index / "manifest.json").read_text())["files"]
    return {k: v["sha256"] for k, v in files.items()}



def run_to_end(cmd: list[str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"build failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return time.perf_counter() - t


def kill_at(cmd: list[str], target: Path, want: str, delay_s: float, timeout_s: float = 3600) -> dict:
    """Start ``cmd``, wait for phase ``want``, sleep ``delay_s``, SIGKILL. Returns what happened."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.perf_counter()
    seen = "start"
    while proc.poll() is None and time.perf_counter() - t0 < timeout_s:
        seen = phase(target)
        if ORDER.index(seen) >= ORDER.index(want):
            break
        time.sleep(POLL_S)
    time.sleep(delay_s)
    at = phase(target)
    alive = proc.poll() is None
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = target.with_name(target.name + ".partial")
    return {"wanted": want, "phase_at_kill": at if alive else "finished", "killed": alive,
            "delay_s": round(delay_s, 3), "seconds_since_start": round(time.perf_counter() - t0, 2),
            "shards_on_disk": len(list(partial.glob("emb_*.npy"))) if partial.exists() else 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=300, help="first N documents of the corpus")
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--shard-rows", type=int, default=256)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args(argv)
    given = sys.argv[1:] if argv is None else list(argv)

    rng = random.Random(args.seed)
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = corpus_head(args.corpus, args.docs, args.workdir / "corpus.jsonl")
    ref = args.workdir / "reference"
    for p in (ref, ref.with_name(ref.name + ".partial")):
        shutil.rmtree(p, ignore_errors=True)
    ref_s = run_to_end(command(corpus, ref, args.shard_rows, args.config))
    manifest = json.loads((ref / "manifest.json").read_text())
    expected = data_files(ref)
    durations = {"chunking": manifest["seconds"]["chunking"], "bm25": manifest["seconds"]["bm25"],
                 "encoding": manifest["seconds"].get("dense", 0.0)}
    print(f"reference: {manifest['n_passages']} passages, {ref_s:.1f} s, phases {durations}", file=sys.stderr)

    trials = []
    for k in range(args.kills):
        want = PHASES[k % len(PHASES)]
        target = args.workdir / f"trial{k:02d}"
        for p in (target, target.with_name(target.name + ".partial")):
            shutil.rmtree(p, ignore_errors=True)
        cmd = command(corpus, target, args.shard_rows, args.config)
        trial = kill_at(cmd, target, want, rng.uniform(0, 0.9 * durations[want]))
        trial["resume_s"] = round(run_to_end(cmd), 2)
        got = data_files(target)
        trial["same_files"] = got == expected
        trial["differing"] = sorted(k2 for k2 in set(got) | set(expected) if got.get(k2) != expected.get(k2))
        v = subprocess.run([sys.executable, "-m", "preqrag.cli", "index", "--verify", str(target)],
                           capture_output=True, text=True)
        trial["verify_ok"] = v.returncode == 0
        trials.append(trial)
        print(json.dumps(trial), file=sys.stderr)
        shutil.rmtree(target, ignore_errors=True)

    killed = [t for t in trials if t["killed"]]
    by_phase = {p: sum(1 for t in killed if t["phase_at_kill"] == p) for p in ("start", *PHASES, "faiss")}
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": "python bench/kill_build.py " + " ".join(
            "WORK" if prev == "--workdir" else a for prev, a in zip([""] + given, given)),
        "corpus_docs": args.docs, "n_passages": manifest["n_passages"], "shard_rows": args.shard_rows,
        "reference_seconds": round(ref_s, 2), "reference_phase_seconds": durations,
        "kills": len(killed), "kills_by_phase": by_phase,
        "resumed_equal_to_reference": sum(t["same_files"] and t["verify_ok"] for t in killed),
        "trials": trials,
    }
    atomic_write_text(args.output, json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "trials"}, indent=2))
    return 0 if all(t["same_files"] and t["verify_ok"] for t in trials) else 1


run = main
"""The entry of ``python -m bench kill_build`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
