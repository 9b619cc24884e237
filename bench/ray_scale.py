"""Ray rows (issue 24): `preqrag index --ray` and `preqrag run --ray` on one machine.

    python bench/ray_scale.py --corpus ../shared/liverag-bench/corpus.jsonl.gz --docs 400 --workers 1,2 \\
        --questions ../shared/liverag-bench/dev.jsonl --run-limit 24 -o docs/bench/ray.json

For each worker count W: a local Ray with W CPUs (``ray.init(num_cpus=W)``) builds the first
``--docs`` documents in W shards (:func:`preqrag.run.distributed.build_index_ray`, default
configuration), and records passages per second per worker (a shard's passages / its seconds),
the shard phase and merge seconds, each worker's peak RSS (``ru_maxrss`` of the worker process,
from the shard manifest) and the driver's. Then ``--run-limit`` questions are answered by W
actors (:class:`preqrag.run.distributed.RayExecutor`; the default preset, hybrid, with SmolLM2
answers of at most 32 tokens: ``RUN_OVERRIDES``) over the index built with W=1, and
questions/hour recorded (model loading in the actors timed apart). A run entry of ``--workers``
may be ``WxC``: W actors of C CPUs each (a local Ray with W·C CPUs; each actor's models then use C
threads, :func:`preqrag.models.threads.cpu_threads`, recorded as ``threads_per_actor`` as an actor reports it;
code before that sizing used the machine's cores), e.g. ``--workers 1,2,1x2``. With ``--index IDX`` no
build runs: the run rows use IDX. A build made by the CLI is recorded with ``--record-build``:

    /usr/bin/time -v preqrag index --corpus C --index IDX --ray --shards 2 > M.json 2> T.log
    python bench/ray_scale.py --record-build M.json --time-log T.log --label "..." -o docs/bench/ray.json

(the manifest's ``ray`` record gives the shard rates, merge time and the workers' peak RSS; the
``time -v`` log the wall time and the driver's peak RSS, merge included). OUT is merged into:
a row replaces the row of the same kind, label, workers and CPUs per worker. On a 2-core machine the workers share the cores: the point is
Ray's overhead, not a speed-up. The FineWeb-10BT estimate is arithmetic on the measured rate
per worker (labelled so).
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import shutil
import sys
import time
from pathlib import Path

from harness import command as recorded_command, corpus_head, machine  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.core.io import atomic_write_text  # noqa: E402

FINEWEB_PASSAGES = 40_000_000
"""FineWeb-10BT's passages at 512 MiniLM tokens, approximately (docs/scale.md)."""
RUN_OVERRIDES = {"generator": {"max_new_tokens": 32}}
"""The default (hybrid) preset with short answers, so the run row is affordable on 2 cores."""



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--docs", type=int, default=400)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--questions", type=Path, default=None)
    ap.add_argument("--run-limit", type=int, default=24)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--index", type=Path, default=None, help="an existing index for the run rows (no build rows)")
    ap.add_argument("--record-build", type=Path, default=None, help="a `preqrag index --ray` manifest (its stdout)")
    ap.add_argument("--time-log", type=Path, default=None, help="with --record-build: its `/usr/bin/time -v` log")
    ap.add_argument("--label", default=None)
    ap.add_argument("--build-command", default=None, help="with --record-build: the command that made the build")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)
    command = recorded_command("ray_scale", argv)
    if args.record_build:
        row = build_row_from_cli(args.record_build, args.time_log, args.label)
        if args.build_command:
            row["build_command"] = args.build_command
        return save(args.out, [row], command)
    if args.questions is None or (args.corpus is None) == (args.index is None):
        ap.error("give --questions and --corpus (build rows, then run rows on the W=1 build) or --index (run rows "
                 "only), or --record-build")

    import ray

    from preqrag.run.distributed import RayExecutor, build_index_ray
    from preqrag.run.runner import run_questions

    work = args.workdir or Path(f"/tmp/ray_scale_{int(time.time())}")
    work.mkdir(parents=True, exist_ok=True)
    cfg = load_config(None)
    rows, first_index = [], args.index
    corpus = None if args.index else corpus_head(args.corpus, args.docs, work / "corpus.jsonl")
    for w in [] if args.index else sorted({run_spec(x)[0] for x in args.workers.split(",")}):
        idx = work / f"idx_w{w}"
        shutil.rmtree(idx, ignore_errors=True)
        ray.init(num_cpus=w, include_dashboard=False, log_to_driver=False)
        try:
            t = time.perf_counter()
            m = build_index_ray(corpus, idx, cfg, n_shards=w)
            wall = time.perf_counter() - t
        finally:
            ray.shutdown()
        first_index = first_index or idx
        r = m["ray"]
        rows.append({"kind": "build", "label": args.label or f"first {args.docs} documents", "workers": w, "documents": args.docs, "passages": m["n_passages"],
                     "wall_s": round(wall, 2), "shard_phase_s": r["shard_phase_seconds"], "merge_s": r["merge_seconds"],
                     "passages_per_s_per_worker": [round(s["passages"] / s["seconds"], 2) for s in r["per_shard"]],
                     "worker_peak_rss_mb": [s["peak_rss_mb"] for s in r["per_shard"]],
                     "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    run_cfg = load_config(None, RUN_OVERRIDES)
    for w, c in [run_spec(x) for x in args.workers.split(",")]:
        out = work / f"answers_w{w}x{c}.jsonl"
        for f in work.glob(f"answers_w{w}x{c}*"):
            f.unlink()
        ray.init(num_cpus=w * c, include_dashboard=False, log_to_driver=False)
        try:
            t = time.perf_counter()
            with RayExecutor(first_index, run_cfg, w, cpus_per_worker=c) as ex:
                load = time.perf_counter() - t
                try:  # what the actors' models use; code before preqrag.models.threads sized them by the machine
                    threads = ray.get(ex.actors[0].threads.remote())
                except AttributeError:
                    threads = "machine's cores"
                s = run_questions(None, args.questions, out, executor=ex, limit=args.run_limit)
        finally:
            ray.shutdown()
        rows.append({"kind": "run", "label": args.label or f"{first_index.name} index, hybrid, 32-token answers",
                     "workers": w, "cpus_per_worker": c, "threads_per_actor": threads, "questions": s.answered, "failed": s.failed,
                     "actor_start_s": round(load, 2), "wall_s": round(s.wall_seconds, 2),
                     "questions_per_hour": round(3600 * s.answered / s.wall_seconds, 1)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return save(args.out, rows, command)


def run_spec(text: str) -> tuple[int, int]:
    """``"W"`` → (W actors, 1 CPU each); ``"WxC"`` → (W, C)."""
    w, _, c = text.strip().partition("x")
    return int(w), int(c or 1)


def _key(row: dict) -> tuple:
    """Rows of the same kind, label, workers and CPUs per worker replace each other."""
    return row["kind"], row["label"], row["workers"], row.get("cpus_per_worker", 1)


def build_row_from_cli(manifest_path: Path, time_log: Path | None, label: str | None) -> dict:
    """A build row from the stdout of ``preqrag index --ray`` (its manifest) and, when given,
    the ``/usr/bin/time -v`` log of that command (wall time, the driver's peak RSS)."""
    import re

    m = json.loads(manifest_path.read_text())
    r = m["ray"]
    row = {"kind": "build", "label": label or "preqrag index --ray", "workers": r["shards"],
           "documents": m["corpus"]["n_documents"], "passages": m["n_passages"],
           "shard_phase_s": r["shard_phase_seconds"], "merge_s": r["merge_seconds"],
           "passages_per_s_per_worker": [round(x["passages"] / x["seconds"], 2) for x in r["per_shard"]],
           "worker_peak_rss_mb": [x["peak_rss_mb"] for x in r["per_shard"]]}
    if time_log:
        text = time_log.read_text()
        wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", text)
        h, mi, sec = wall.groups()
        row["wall_s"] = round(int(h or 0) * 3600 + int(mi) * 60 + float(sec), 1)
        row["driver_peak_rss_mb"] = round(int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
                                              .group(1)) / 1024, 1)
    return row


def save(out: Path, rows: list[dict], command: str) -> int:
    """Merge ``rows`` into ``out`` (same kind, label, workers and CPUs per worker: replaced), stamp each with the
    machine and date, recompute the FineWeb-10BT estimate from every build row's rates."""
    data = json.loads(out.read_text()) if out.exists() else {"rows": [], "commands": []}
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for row in rows:
        row.update(machine=machine(), date=now, command=command)
        data["rows"] = [r for r in data["rows"] if _key(r) != _key(row)] + [row]
    data["commands"] = sorted({r["command"] for r in data["rows"]})
    # one estimate per SIMD level: MiniLM's CPU rate per worker was 21.0 passages/s on a CPU with native bf16
    # (AVX-512 zen4, autocast) and 8.65 on an AVX2 one (fp32): a mean over both would describe neither
    by_simd: dict[str, list[float]] = {}
    for r in data["rows"]:
        if r["kind"] == "build":
            by_simd.setdefault(r.get("machine", {}).get("simd") or "unknown", []).extend(r["passages_per_s_per_worker"])
    data["fineweb_10bt_estimate"] = []
    for simd, rates in sorted(by_simd.items()):
        rate = sum(rates) / len(rates)
        data["fineweb_10bt_estimate"].append({
            "label": "arithmetic on the measured mean rate per CPU worker (build rows of this SIMD level), not a measurement",
            "simd": simd, "passages_per_s_per_worker": round(rate, 2),
            "days_for_40M_passages": {str(n): round(FINEWEB_PASSAGES / (rate * n) / 86400, 2) for n in (1, 8, 64, 256)},
        })
    atomic_write_text(out, json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2))
    return 0


run = main
"""The entry of ``python -m bench ray_scale`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
