"""Structured (grammar-constrained) decoding in the batched llama.cpp engine: the grammar checked
lazily (the shipped :class:`preqrag.models.llm.batching.BatchDecoder`) against the grammar masking the
whole vocabulary at every token (the engine before, llama-cpp-python's sampler chain), side by side
on this machine in one run, written to docs/bench/grammar_sampling.json
(docs/results/grammar_sampling.md).

The requests: the first ``--n`` questions of ``--questions``, each with CIR's Table 2 prompt
(:func:`preqrag.systems.cir.generator.build_cir_prompt`, P.1) over the question's own reference
answer and two other questions' answers as segments, replied to under CIR's answer schema
(:func:`~preqrag.systems.cir.generator.cir_answer_schema`, 3 segments, 1,024 tokens, at least 2
sentences), greedy, all in one ``chat_many`` call with the default LLM at ``[llm] n_parallel``
(16). Per row: wall seconds of the call, decoded and prefilled tokens, decode steps, tokens per
second, and whether the replies are the same under both samplers (greedy: they must be).

    python bench/grammar_sampling.py --questions ../shared/liverag-bench/dev.jsonl --n 16
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

from harness import machine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from preqrag.core.config import LLMConfig  # noqa: E402
from preqrag.models.llm import batching  # noqa: E402
from preqrag.models.llm.llamacpp import LlamaCppLLM  # noqa: E402
from preqrag.systems.cir.generator import build_cir_prompt, cir_answer_schema  # noqa: E402


class MaskingDecoder(batching.BatchDecoder):
    """The engine before: the grammar in each sequence's sampler chain, so every draw masks the
    whole vocabulary (llama-cpp-python's ``Llama._init_sampler`` order)."""

    def _seq(self, index, job, slot):
        chain = self._masking_chain(job) if job.grammar is not None else self._sampler(job)
        return batching._Seq(index, job, slot, chain, None)

    def _masking_chain(self, job):
        """Penalties, the grammar, greedy (the bench decodes greedily)."""
        from llama_cpp import _internals

        s = {**batching.DEFAULT_SAMPLING, **{k: v for k, v in job.sampling.items() if v is not None}}
        chain = _internals.LlamaSampler()
        chain.add_penalties(n_vocab=self._n_vocab, penalty_last_n=batching.PENALTY_LAST_N,
                            penalty_repeat=s["repeat_penalty"], penalty_freq=0.0, penalty_present=0.0)
        chain.add_grammar(self.llama._model, job.grammar)
        chain.add_greedy()
        return chain


def requests(questions: Path, n: int) -> list[list[dict]]:
    rows = [json.loads(x) for x in questions.read_text().splitlines() if x.strip()][: n + 2]
    out = []
    for i, q in enumerate(rows[:n]):
        segments = [q["answer"], rows[i + 1]["answer"], rows[i + 2]["answer"]]
        out.append([{"role": "user", "content": build_cir_prompt(q["question"], segments, "P.1")}])
    return out


def measure(llm: LlamaCppLLM, reqs: list[list[dict]], label: str) -> tuple[dict, list]:
    schema = cir_answer_schema(3, 1024, 2)
    t0 = time.perf_counter()
    replies = llm.chat_many(reqs, max_tokens=1024, schema=schema)
    wall = time.perf_counter() - t0
    st = llm.last_batch
    return {"sampler": label, "requests": len(reqs), "seconds": round(wall, 1),
            "decoded_tokens": st.decoded_tokens, "prompt_tokens": st.prompt_tokens, "steps": st.steps,
            "decode_tokens_per_s": round(st.decoded_tokens / wall, 1)}, replies


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", required=True, help="JSONL with question and answer fields")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / "grammar_sampling.json"))
    args = ap.parse_args(argv)
    reqs = requests(Path(args.questions), args.n)
    llm = LlamaCppLLM(LLMConfig())  # the default LLM, [llm] defaults (n_parallel 16)
    model = llm.cfg.model
    llm.warm_up()
    llm.chat_many(reqs[:2], max_tokens=1)  # warm: the batch context is built, kernels paged in
    rows, replies = [], {}
    for label, cls in (("grammar masks every token (before)", MaskingDecoder),
                       ("grammar checked lazily (shipped)", batching.BatchDecoder)):
        eng = llm._batch_engine()
        eng.__class__ = cls  # same context and model; only the sampling differs
        row, replies[label] = measure(llm, reqs, label)
        rows.append(row)
    before, after = (replies[r["sampler"]] for r in rows)
    same = sum(a == b for a, b in zip(before, after))
    m = machine()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for r in rows:
        r.update({"same_replies": f"{same}/{len(reqs)}", "model": model, "machine": m, "date": date,
                  "script": f"python bench/grammar_sampling.py --questions {Path(args.questions).name} --n {args.n}"})
    rows[1]["speedup"] = round(rows[0]["seconds"] / rows[1]["seconds"], 2)
    note = ("One batched chat_many call of CIR answer requests (Table 2 prompt, answer schema, greedy) with the "
            "default LLM; the same engine and context for both rows, only the grammar sampling differs.")
    Path(args.out).write_text(json.dumps({"rows": rows, "note": note}, indent=1) + "\n")
    for r in rows:
        print(json.dumps(r))
    return 0


run = main
"""The entry of ``python -m bench grammar_sampling`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
