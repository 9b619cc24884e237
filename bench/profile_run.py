"""Sampling profile of `preqrag run` with py-spy, summarised by where the time goes.

  python bench/profile_run.py --index IDX --questions Q.jsonl --limit 24 -o /tmp/prof \
      [--config CFG] [--rate 50] [--out docs/bench/profile.json]

Runs ``py-spy record --format raw`` around the real ``preqrag run`` command (py-spy samples
the process from outside, ~1–2 % overhead at 50 Hz), then classifies every sample by its
Python stack: inside model inference (llama.cpp chat completion, ONNX ``session.run`` of the
cross-encoder or embedder, sentence-transformers encode) or outside it (reranker
tokenisation, BM25, FAISS, classification, prompt building, I/O, imports and model loading,
other). Writes the raw stacks to ``-o`` and the samples per category to ``--out`` (JSON;
docs/results/profile.md shows it: ``python bench/results.py``).

py-spy needs ptrace permission (root, or ``--cap-add SYS_PTRACE`` in containers).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import shutil
import subprocess
from pathlib import Path

from harness import command, machine, placeholders  # noqa: E402

# (category, is model inference, substrings any of which must occur in the stack), first match wins
CATEGORIES = [
    ("LLM inference (llama.cpp)", True, ["create_chat_completion", "chat.completions.create"]),
    ("cross-encoder inference (onnxruntime)", True, ["run_batch (preqrag/models/onnx_runtime.py"]),
    ("embedder inference", True, ["SentenceTransformer.encode", "encode (sentence_transformers"]),
    ("imports and model/index loading", False, ["_find_and_load", "_load (preqrag", "Index.open", "open (preqrag/index/embedded.py",
                                                "from_config", "Llama.__init__", "load_session"]),
    ("reranker tokenisation", False, ["score (preqrag/models/rerankers/onnx.py"]),
    ("BM25", False, ["preqrag/retrieval/bm25.py"]),
    ("FAISS search", False, ["search_vectors"]),
    ("classification", False, ["classify ("]),
    ("prompt building / token counting", False, ["preqrag/components/generation.py", "count_tokens"]),
    ("rewrite parsing", False, ["preqrag/systems/preqrag/rewriting.py"]),
    ("writing answers/traces", False, ["append_jsonl", "atomic_write", "model_dump"]),
]


def classify(stack: str) -> tuple[str, bool]:
    for name, is_model, keys in CATEGORIES:
        if any(k in stack for k in keys):
            return name, is_model
    return "other", False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--limit", type=int, default=24)
    ap.add_argument("--config", default=None)
    ap.add_argument("--rate", type=int, default=50)
    ap.add_argument("-o", "--workdir", required=True)
    ap.add_argument("--out", default="docs/bench/profile.json")
    ap.add_argument("--summarise-only", action="store_true", help="re-read WORKDIR/stacks.txt, do not run")
    args = ap.parse_args(argv)
    if shutil.which("py-spy") is None:
        ap.error('py-spy is not installed: pip install py-spy')
    work = Path(args.workdir)
    if work.exists() and not args.summarise_only:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    stacks = work / "stacks.txt"
    run = [shutil.which("preqrag") or "preqrag", "run", args.questions, "--index", args.index,
           "-o", str(work / "answers.jsonl"), "--limit", str(args.limit)]
    if args.config:
        run += ["--config", args.config]
    cmd = ["py-spy", "record", "--format", "raw", "-r", str(args.rate), "-o", str(stacks), "--"] + run
    rc = subprocess.run(cmd).returncode if not args.summarise_only else 0
    counts: collections.Counter = collections.Counter()
    model: dict[str, bool] = {}
    background = 0
    for line in stacks.read_text(encoding="utf-8").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack.startswith("<module>"):  # other threads: rich's refresh thread, idle pool workers
            background += int(n)
            continue
        name, is_model = classify(stack)
        counts[name] += int(n)
        model[name] = is_model
    total = sum(counts.values())
    inside = sum(n for k, n in counts.items() if model[k])
    startup = counts["imports and model/index loading"]
    data = {"command": command("profile_run", argv),
            "profiled": f"py-spy record -r {args.rate} -- " + " ".join(placeholders(run[1:])),
            "machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "samples": total, "background_samples": background,
            "rows": [{"where": name, "model_inference": model[name], "samples": n, "share": round(n / total, 4)}
                     for name, n in counts.most_common()],
            "inside_model_inference": round(inside / total, 4), "outside_model_inference": round(1 - inside / total, 4),
            "startup_share": round(startup / total, 4), "note": note(total, background, args.limit)}
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in data.items() if k != "machine"}, indent=1))
    return rc


def note(total: int, background: int, limit: int) -> str:
    """What the figures are (written into the JSON; docs/results/profile.md shows it)."""
    return (f"{total} samples of the main thread while running (idle samples excluded; {background} samples of "
            "background threads, mostly the progress bar's refresh thread waiting on a condition, left out); share: of "
            "those samples. startup_share: imports, index and model loading, a fixed cost that a "
            f"{limit}-question profile weighs far more than a 500-question run.")


run = main
"""The entry of ``python -m bench profile_run`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
