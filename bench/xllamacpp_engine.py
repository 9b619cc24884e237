"""Engine rates of xllamacpp (llama.cpp's own server in-process) on answer-sized prompts (issue 54).

Run by ``bench/batching.py --xllamacpp-python PY`` with the interpreter of a separate virtual
environment that has ``pip install xllamacpp`` (its wheel carries its own ggml, built for AVX2
without run-time CPU dispatch: it must not share a process with llama-cpp-python's portable
build). Needs no preqrag import: the prompts come as a JSON file.

For each P of ``--parallel``: one ``xllamacpp.Server`` with ``n_parallel = P`` slots of
``--slot-ctx`` tokens each, ``--threads`` threads, flash attention, continuous batching; P chat
requests sent together from P threads (the server is thread-safe) with ``cache_prompt`` off, first
with a 1-token reply (prefill tokens/s = prompt tokens / wall seconds), then P other prompts with up
to ``--decode-tokens`` tokens at ``repeat_penalty`` 1.1, greedy (decode tokens/s = completion tokens
/ (wall seconds − their prompt tokens at the measured prefill rate)); no prompt cache (other prompts,
``cache_ram_mib`` 0). P = 1 runs ``--sequential-requests`` requests one after another. Prints one
JSON row per P.

    PY bench/xllamacpp_engine.py --prompts PROMPTS.json --model MODEL.gguf --parallel 1,2,4,8,16
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor


def _send(server, messages: list[dict], max_tokens: int) -> dict:
    return server.handle_chat_completions({"messages": messages, "max_tokens": max_tokens, "temperature": 0.0,
                                           "repeat_penalty": 1.1, "cache_prompt": False})


def _timed(server, reqs: list[list[dict]], max_tokens: int, together: bool) -> tuple[float, int, int]:
    t = time.perf_counter()
    if together:
        with ThreadPoolExecutor(len(reqs)) as ex:
            out = list(ex.map(lambda m: _send(server, m, max_tokens), reqs))
    else:
        out = [_send(server, m, max_tokens) for m in reqs]
    seconds = time.perf_counter() - t
    for o in out:
        if "usage" not in o:
            raise RuntimeError(f"xllamacpp reply without usage: {str(o)[:300]}")
    return (seconds, sum(o["usage"]["prompt_tokens"] for o in out),
            sum(o["usage"]["completion_tokens"] for o in out))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", required=True, help="JSON list of chat message lists")
    ap.add_argument("--model", required=True)
    ap.add_argument("--parallel", default="1,2,4,8,16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--slot-ctx", type=int, default=2048)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--sequential-requests", type=int, default=8)
    a = ap.parse_args(argv)
    import xllamacpp as xlc

    prompts = json.loads(open(a.prompts, encoding="utf-8").read())
    for p in [int(x) for x in a.parallel.split(",")]:
        params = xlc.CommonParams()
        params.model.path = a.model
        params.n_parallel = p
        params.n_ctx = a.slot_ctx * p
        params.cpuparams.n_threads = a.threads
        params.cpuparams_batch.n_threads = a.threads
        params.cont_batching = True
        params.cache_ram_mib = 0  # no host-memory prompt cache: every prompt is prefilled
        params.n_cache_reuse = 0
        server = xlc.Server(params)
        n = p if p > 1 else a.sequential_requests
        first, second = prompts[:n], prompts[n:2 * n]  # other prompts for the decode call: nothing cached
        _timed(server, prompts[-2:], 1, p > 1)  # warm: kernels paged in, slots allocated
        pre_s, tokens, _ = _timed(server, first, 1, p > 1)
        rate = tokens / pre_s
        total_s, tokens2, decoded = _timed(server, second, a.decode_tokens, p > 1)
        print(json.dumps({"engine": f"xllamacpp {xlc.__version__} (llama.cpp server, AVX2 build)", "parallel": p,
                          "requests": n, "prompt_tokens": tokens,
                          "prefill_tokens_per_s": round(rate, 1), "decoded_tokens": decoded,
                          "decode_tokens_per_s": round(decoded / max(total_s - tokens2 / rate, 1e-6), 1),
                          "seconds_per_request": round(total_s / n, 2)}), flush=True)
        del server
    return 0


run = main
"""The entry of ``python -m bench xllamacpp_engine`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
