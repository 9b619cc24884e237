"""Prompt-lookup speculative decoding against plain greedy decoding for the answer step (issue 40).

llama-cpp-python's ``LlamaPromptLookupDecoding`` (Saxena 2023, "Prompt lookup decoding",
github.com/apoorvumang/prompt-lookup-decoding) drafts the next ``num_pred_tokens`` tokens by
matching the last n-gram (``max_ngram_size`` 2) of the sequence against the prompt, and the model
verifies the draft in one batch: a RAG answer that copies its context should need fewer decode
steps. The catch on a CPU: llama-cpp-python computes logits for every prompt token when a draft
model is set (``logits_all``), and a batch of k draft tokens costs about k tokens of prefill, which
is compute-bound, while one decode step is memory-bound.

For the first ``--n`` answers of a ``bench/answers.py`` answer file (their ``final_prompt``, as the
default generator built it), each configuration answers every prompt greedily (one llama.cpp
context per configuration, warmed up by one short call; the instruction prefix's KV cache is reused
across prompts, as in a run) and the row records seconds per answer and how many answers equal the
plain decoding's.

    python bench/prompt_lookup.py --answers ANSWERS.jsonl --n 6 [--model qwen2.5-coder-1.5b]

Appends to docs/bench/prompt_lookup.json (docs/results/prompt_lookup.md shows it). A number here is a
measurement on the machine named, never an assertion.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

from harness import command as recorded_command, describe, machine  # noqa: E402

from preqrag.core.io import atomic_write_text  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "bench" / "prompt_lookup.json"
NOTE = ("The answer step's prompts (default generator, bench contexts) answered greedily by llama-cpp-python, with "
        "and without `LlamaPromptLookupDecoding` (num_pred_tokens drafted tokens); vs_plain: seconds per answer over "
        "plain decoding's; identical_to_plain: answers equal to plain decoding's (of n_answers).")
"""What the rows are (written into the JSON; docs/results/prompt_lookup.md shows it)."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--answers", required=True, help="a bench/answers.py answer file (JSON lines with final_prompt)")
    ap.add_argument("--n", type=int, default=6, help="answers to time (the file's first N)")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", help="a registry name or a .gguf path")
    ap.add_argument("--draft", default="4,10", help="num_pred_tokens values to try (comma-separated)")
    ap.add_argument("--max-tokens", type=int, default=200, help="answer tokens at most (PreQRAG: < 200)")
    ap.add_argument("-o", "--out", default=str(OUT))
    args = ap.parse_args(argv)

    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from preqrag.models.llm.llama_build import load_backends
    from preqrag.models.files import resolve
    from preqrag.models.threads import cpu_threads

    load_backends()
    path = resolve(args.model).location
    prompts = [json.loads(line)["final_prompt"] for line in Path(args.answers).open(encoding="utf-8")][:args.n]
    configs = [("plain", 0)] + [("prompt-lookup", int(k)) for k in args.draft.split(",") if k.strip()]
    results = []
    for name, k in configs:
        extra = {"draft_model": LlamaPromptLookupDecoding(num_pred_tokens=k)} if k else {}
        llm = Llama(model_path=path, n_ctx=4096, n_threads=cpu_threads(), flash_attn=True, verbose=False, seed=0,
                    **extra)
        llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=2, temperature=0.0)
        outs, total = [], 0.0
        for p in prompts:
            t0 = time.perf_counter()
            o = llm.create_chat_completion(messages=[{"role": "user", "content": p}], max_tokens=args.max_tokens,
                                           temperature=0.0)
            total += time.perf_counter() - t0
            outs.append(o["choices"][0]["message"]["content"])
        results.append((name, k, total / len(prompts), outs))
        print(f"{name} {k}: {total / len(prompts):.2f} s per answer", file=sys.stderr)
        del llm
    plain = results[0]
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    command = recorded_command("prompt_lookup", argv)
    rows = [{"config": name, "num_pred_tokens": k, "n_answers": len(prompts), "seconds_per_answer": round(s, 3),
             "vs_plain": round(s / plain[2], 3), "identical_to_plain": sum(a == b for a, b in zip(outs, plain[3])),
             "max_tokens": args.max_tokens, "llm": args.model, "machine": describe(machine()), "date": now,
             "command": command} for name, k, s, outs in results]
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {"rows": []}
    data["rows"] += rows
    data["note"] = NOTE
    atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    print(json.dumps(rows, indent=1))
    return 0


run = main
"""The entry of ``python -m bench prompt_lookup`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    main()
