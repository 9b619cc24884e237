"""Batched answering on llama.cpp (issue 54): engine rates and `preqrag run` q/h, side by side.

Two parts, both on this machine in one run, written to docs/bench/batching.json (docs/results/batching.md):

1. ``engine``: the default LLM on answer-sized prompts (PreQRAG prompt B around a dev question
   and three passage-sized texts, ~300 tokens in Qwen2.5's tokenizer), for

   * ``sequential``: llama-cpp-python's ``create_chat_completion``, one request after another
     (``[llm] n_parallel = 1``, the path before continuous batching; its prompt cache reuses the
     shared prefix of consecutive prompts);
   * ``batched`` with P = 2, 4, 8, 16, 32 parallel sequences
     (:class:`preqrag.models.llm.batching.BatchDecoder`, the shared prefix prefilled once).

   Per row: ``prefill_tokens_per_s`` (P prompts with a 1-token reply: prompt tokens / wall
   seconds) and ``decode_tokens_per_s`` (aggregate: the same P prompts answered with up to
   ``--decode-tokens`` tokens; generated tokens / (wall seconds − the prefill seconds)).
2. ``run``: ``preqrag run`` over the first ``--limit`` questions of ``--questions`` through
   bench/throughput.py (wall time from launch to exit, model loading included), once with the
   sequential setting (``[llm] n_parallel = 1``, ``[run] batch_size = 8``: the defaults before)
   and once with the shipped defaults; ``speedup`` = batched q/h / sequential q/h.

xllamacpp (llama.cpp's server in-process, ``pip install xllamacpp``) is measured with
``--xllamacpp-python PY``: bench/xllamacpp_engine.py in a separate environment (its wheel carries
its own ggml, built for AVX2 without run-time CPU dispatch, which must not share a process with
llama-cpp-python's portable build), on the same prompts, as extra engine rows.

    python bench/batching.py --index IDX \\
        --questions ../shared/liverag-bench/liverag_lcd_session1.jsonl --limit 100 --work WORK
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

from harness import command, machine

from preqrag.core.io import atomic_write_text


def _prompts(dev: Path, n: int) -> list[list[dict]]:
    from preqrag.components.generation import build_prompt

    rows = [json.loads(line) for line in dev.read_text().splitlines() if line.strip()][: n + 1]
    out = []
    for i in range(n):
        r, other = rows[i], rows[i + 1]["answer"]
        out.append([{"role": "user", "content": build_prompt(r["question"], [r["answer"][:700], other[:500],
                                                                               other[500:900]])}])
    return out


def engine_rows(model: str, dev: Path, parallels: list[int], decode_tokens: int) -> list[dict]:
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm.llamacpp import LlamaCppLLM

    rows = []
    for p in [1] + parallels:
        llm = LlamaCppLLM(LLMConfig(model=model, n_parallel=p))
        llm.warm_up()
        reqs = _prompts(dev, max(p, 2) if p > 1 else 8)[: p if p > 1 else 8]
        llm.chat_many(_prompts(dev, 2), max_tokens=1)  # warm: the batch context is built, kernels paged in
        tokens = sum(llm.count_tokens(r[0]["content"]) for r in reqs)
        t = time.perf_counter()
        llm.chat_many(reqs, max_tokens=1)
        prefill_s = time.perf_counter() - t
        t = time.perf_counter()
        out = llm.chat_many(reqs, max_tokens=decode_tokens, repeat_penalty=1.1)
        total_s = time.perf_counter() - t
        decoded = sum(llm.count_tokens(o) for o in out if isinstance(o, str))
        rows.append({"engine": "sequential (create_chat_completion)" if p == 1 else "batched (BatchDecoder)",
                     "parallel": p, "requests": len(reqs), "prompt_tokens": tokens,
                     "prefill_tokens_per_s": round(tokens / prefill_s, 1),
                     "decoded_tokens": decoded,
                     "decode_tokens_per_s": round(decoded / max(total_s - prefill_s, 1e-6), 1),
                     "seconds_per_request": round(total_s / len(reqs), 2)})
        print(json.dumps(rows[-1]), flush=True)
        del llm
    return rows


def xllamacpp_rows(python: str, model: str, dev: Path, parallels: list[int], decode_tokens: int,
                   work: Path) -> list[dict]:
    """bench/xllamacpp_engine.py in ``python`` (a separate environment with ``pip install xllamacpp``:
    its own ggml must not share a process with llama-cpp-python's) on the same answer-sized prompts."""
    import subprocess

    from preqrag.models.files import resolve

    prompts = work / "xllamacpp_prompts.json"
    prompts.write_text(json.dumps(_prompts(dev, 2 * max(parallels + [8]) + 2)))
    cmd = [python, str(Path(__file__).with_name("xllamacpp_engine.py")), "--prompts", str(prompts),
           "--model", str(resolve(model).location), "--parallel", ",".join(map(str, parallels)),
           "--decode-tokens", str(decode_tokens)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def run_rows(index: str, questions: str, limit: int, work: Path, parallels: list[int]) -> list[dict]:
    """``preqrag run`` over the first ``limit`` questions once per setting: ``n_parallel = 1`` with
    ``[run] batch_size = 8`` (the sequential path, the defaults before batching), then each P of
    ``parallels`` with the other defaults; ``speedup`` = q/h over the sequential row."""
    import throughput

    from preqrag.core.config import LLMConfig

    default_p = LLMConfig().n_parallel
    settings = {"sequential (n_parallel 1, batch 8)": (1, "[llm]\nn_parallel = 1\n[run]\nbatch_size = 8\n")}
    for p in parallels:
        label = "batched (defaults)" if p == default_p else f"batched (n_parallel {p})"
        settings[label] = (p, "" if p == default_p else f"[llm]\nn_parallel = {p}\n")
    rows = []
    for label, (p, toml) in settings.items():
        slug = "seq" if p == 1 else ("batched" if p == default_p else f"p{p}")
        cfg = work / f"{slug}.toml"
        cfg.write_text(toml)
        out = work / f"{slug}.throughput.json"
        answers = work / f"{slug}.answers.jsonl"
        if not out.exists():
            if answers.exists():
                for f in work.glob(f"{slug}.answers*"):
                    f.unlink()
            throughput.main(["--index", index, "--questions", questions, "-o", str(answers), "--config", str(cfg),
                             "--limit", str(limit), "--out", str(out)])
        r = json.loads(out.read_text())
        llm = r["config"]["llm"]
        rows.append({"setting": label, "n_parallel": llm.get("n_parallel", 1), "batch_size": r["config"]["run"]["batch_size"],
                     "answered": r["answered"], "wall_seconds": r["wall_seconds"],
                     "questions_per_hour": r["questions_per_hour"],
                     "seconds_per_question_by_stage": r["seconds_per_question_by_stage"],
                     **({"default": True} if p == default_p else {})})
    for row in rows[1:]:
        row["speedup"] = round(row["questions_per_hour"] / rows[0]["questions_per_hour"], 3)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", default="../shared/liverag-bench/liverag_lcd_session1.jsonl")
    ap.add_argument("--dev", default="../shared/liverag-bench/dev.jsonl")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--parallel", default="2,4,8,16,32")
    ap.add_argument("--run-parallel", default="2,4,8,16",
                    help="n_parallel settings of the `preqrag run` rows, besides the sequential one")
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--work", required=True, help="run answers and per-setting JSON (a rerun resumes)")
    ap.add_argument("--skip-run", action="store_true", help="engine rows only")
    ap.add_argument("--xllamacpp-python", default=None, help=(
        "the Python of a separate environment with `pip install xllamacpp`: its engine rows are measured too"))
    ap.add_argument("--xllamacpp-parallel", default="1,2,4,8")
    ap.add_argument("--engine-from", default=None, help="take the engine rows (and their date) from this "
                    "earlier output of the script, on the same machine, instead of measuring them again")
    ap.add_argument("--out", default="docs/bench/batching.json")
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if args.engine_from:
        engine = json.loads(Path(args.engine_from).read_text())["engine"]
    else:
        engine = engine_rows(args.model, Path(args.dev), [int(x) for x in args.parallel.split(",")],
                             args.decode_tokens)
        if args.xllamacpp_python:
            engine += xllamacpp_rows(args.xllamacpp_python, args.model, Path(args.dev),
                                     [int(x) for x in args.xllamacpp_parallel.split(",")], args.decode_tokens, work)
    runs = [] if args.skip_run else run_rows(args.index, args.questions, args.limit, work,
                                               [int(x) for x in args.run_parallel.split(",")])
    result = {"model": args.model, "engine": engine, "run": runs, "machine": machine(), "date": date,
              "note": ("engine: prefill_tokens_per_s = prompt tokens / wall seconds of P prompts with a 1-token "
                       "reply; decode_tokens_per_s = generated tokens of all P sequences / (wall seconds - "
                       "the prefill seconds). run: `preqrag run` wall time from launch to exit (model loading "
                       "included); speedup = q/h over the sequential row, measured in the same run."),
              "command": command("batching", argv)}
    out = Path(args.out)
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench batching`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
