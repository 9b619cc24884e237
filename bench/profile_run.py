"""Sampling profile of `preqrag run` with py-spy, summarised by where the time goes.

  python bench/profile_run.py --index IDX --questions Q.jsonl --limit 24 -o /tmp/prof \
      [--config CFG] [--rate 50] [--out docs/bench/profile.md]

Runs ``py-spy record --format raw`` around the real ``preqrag run`` command (py-spy samples
the process from outside, ~1–2 % overhead at 50 Hz), then classifies every sample by its
Python stack: inside model inference (llama.cpp chat completion, ONNX ``session.run`` of the
cross-encoder or embedder, sentence-transformers encode) or outside it (reranker
tokenisation, BM25, FAISS, classification, prompt building, I/O, imports and model loading,
other). Writes the raw stacks to ``-o`` and a Markdown table to ``--out``.

py-spy needs ptrace permission (root, or ``--cap-add SYS_PTRACE`` in containers).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import shutil
import subprocess
from pathlib import Path

from _common import describe, machine, md_table  # noqa: E402

# (category, is model inference, substrings any of which must occur in the stack), first match wins
CATEGORIES = [
    ("LLM inference (llama.cpp)", True, ["create_chat_completion", "chat.completions.create"]),
    ("cross-encoder inference (onnxruntime)", True, ["run_batch (preqrag/onnx_runtime.py"]),
    ("embedder inference", True, ["SentenceTransformer.encode", "encode (sentence_transformers"]),
    ("imports and model/index loading", False, ["_find_and_load", "_load (preqrag", "Index.open", "open (preqrag/index.py",
                                                "from_config", "Llama.__init__", "load_session"]),
    ("reranker tokenisation", False, ["score (preqrag/rerankers/onnx.py"]),
    ("BM25", False, ["preqrag/retrieval/bm25.py"]),
    ("FAISS search", False, ["search_vectors"]),
    ("classification", False, ["classify ("]),
    ("prompt building / token counting", False, ["preqrag/generation.py", "count_tokens"]),
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
    ap.add_argument("--out", default="docs/bench/profile.md")
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
    lines = ["# Where a run spends its time (py-spy sampling profile)", "",
             f"Command: `python bench/profile_run.py --limit {args.limit} ...` → `py-spy record -r {args.rate} -- "
             f"{' '.join(run[1:])}`  ",
             f"Machine: {describe(machine())}. Date: {datetime.date.today().isoformat()}. "
             f"{total} samples of the main thread while running (idle samples excluded; {background} samples of "
             f"background threads — mostly the progress bar's refresh thread waiting on a condition — left out).", "",
             *md_table([{"where": name, "model inference?": "yes" if model[name] else "no", "samples": n,
                         "share": f"{100 * n / total:.1f} %"} for name, n in counts.most_common()],
                       ["where", "model inference?", "samples", "share"])]
    lines += ["", f"**Inside model inference: {100 * inside / total:.1f} %; outside: "
              f"{100 * (total - inside) / total:.1f} %** (of which start-up — imports, index and model loading — "
              f"{100 * counts['imports and model/index loading'] / total:.1f} %, a fixed cost that a "
              f"{args.limit}-question profile weighs far more than a 500-question run).", ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
