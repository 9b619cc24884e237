"""Prefill and decode speed of llama.cpp builds (issue 9: portable vs native) for one GGUF model.

Each build is a directory of llama.cpp libraries that llama-cpp-python loads through its
``LLAMA_CPP_LIB_PATH`` override; each is measured in its own subprocess, alternating builds
over ``--rounds`` rounds so that machine noise hits both alike. Per round: prefill = one
``eval`` of a ``--prompt-tokens`` prompt (a real smoke-corpus passage text, batch 512) after
a warm-up; decode = ``--decode-tokens`` single-token ``eval`` calls after it (what greedy
generation does per token). Reported: median tokens/s over rounds.

    python bench/llama_speed.py --build portable=<site-packages>/llama_cpp/lib \\
        --build native=/tmp/native_lib -o docs/bench/llama_speed.json

``--model`` (default the bundled SmolLM2-135M) is a registry name (``qwen2.5-coder-1.5b``) or a
``.gguf`` path, e.g. a requantized copy of the default LLM.

A native build for comparison: ``pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36``
and ``pip wheel`` it without CMAKE_ARGS (GGML_NATIVE=ON), then copy its ``llama_cpp/lib``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

WORKER = r"""
import gzip, json, os, sys, time
from preqrag.models.llm.llama_build import load_backends
from preqrag.models.files import resolve
variant = load_backends()
from llama_cpp import Llama
n_prompt, n_decode, threads = map(int, sys.argv[1:4])
model = sys.argv[5]
llm = Llama(model_path=model if model.endswith(".gguf") else resolve(model).location, n_ctx=2048, n_batch=512,
            n_threads=threads, flash_attn=True, verbose=False, seed=0)
text = ""
with gzip.open(sys.argv[4], "rt", encoding="utf-8") as fh:
    for line in fh:
        text += json.loads(line)["text"] + " "
        if len(text) > 20 * n_prompt:
            break
tokens = llm.tokenize(text.encode(), add_bos=True)[:n_prompt]
llm.reset(); llm.eval(tokens[:64])  # warm-up
llm.reset()
t = time.perf_counter(); llm.eval(tokens); prefill = time.perf_counter() - t
t = time.perf_counter()
for tok in tokens[:n_decode]:
    llm.eval([tok])
decode = time.perf_counter() - t
print(json.dumps({"variant": variant, "prefill_tps": n_prompt / prefill, "decode_tps": n_decode / decode}))
"""


def measure(lib: str, args) -> dict:
    env = dict(os.environ, LLAMA_CPP_LIB_PATH=lib)
    env.pop("GGML_BACKEND_PATH", None)
    out = subprocess.run([sys.executable, "-c", WORKER, str(args.prompt_tokens), str(args.decode_tokens),
                          str(args.threads), str(args.corpus), args.model], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, help="NAME=LIBDIR (repeatable)")
    ap.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                    help="a registry name or a .gguf path (default: the bundled SmolLM2-135M)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--corpus", type=Path,
                    default=here.parent.parent / "shared" / "liverag-bench" / "smoke_corpus.jsonl.gz")
    ap.add_argument("-o", "--output", type=Path, default=here.parent / "docs" / "bench" / "llama_speed.json")
    args = ap.parse_args(argv)
    builds = dict(b.split("=", 1) for b in args.build)
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    for r in range(args.rounds):
        for name, lib in builds.items():
            runs[name].append(measure(lib, args))
            print(f"round {r + 1} {name}: {runs[name][-1]}", file=sys.stderr)
    flags = set(open("/proc/cpuinfo").read().split()) if Path("/proc/cpuinfo").exists() else set()
    rows = []
    for name, rs in runs.items():
        rows.append({"build": name, "lib_dir": _placeholder(builds[name], "LIBDIR"), "variant": rs[0]["variant"],
                     "prefill_tokens_per_s": round(statistics.median(x["prefill_tps"] for x in rs), 1),
                     "decode_tokens_per_s": round(statistics.median(x["decode_tps"] for x in rs), 1),
                     "rounds": [{k: round(v, 1) if isinstance(v, float) else v for k, v in x.items()} for x in rs]})
    base = rows[-1]
    for row in rows:
        row["prefill_vs_last"] = round(row["prefill_tokens_per_s"] / base["prefill_tokens_per_s"], 3)
        row["decode_vs_last"] = round(row["decode_tokens_per_s"] / base["decode_tokens_per_s"], 3)
    model = os.path.basename(args.model) if os.path.isabs(args.model) else args.model  # no machine paths in docs/bench
    result = {"model": model, "prompt_tokens": args.prompt_tokens,
              "decode_tokens": args.decode_tokens, "threads": args.threads, "rows": rows,
              "machine": {"cpu_flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c"))),
                          "nproc": os.cpu_count(), "platform": platform.platform()},
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "command": "python bench/llama_speed.py "
                         + " ".join(_recorded_argv(sys.argv[1:] if argv is None else argv))}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({r["build"]: (r["prefill_tokens_per_s"], r["decode_tokens_per_s"]) for r in rows}))
    return 0


def _placeholder(value: str, name: str) -> str:
    """``value`` unless it is a filesystem path, which docs/bench records as ``name``."""
    return name if "/" in value else value


def _recorded_argv(argv: list[str]) -> list[str]:
    """``argv`` with machine paths written as placeholders (``--build portable=LIBDIR``,
    ``--model MODEL.gguf``), so that docs/bench holds no machine paths."""
    out: list[str] = []
    for i, a in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if prev == "--build" and "=" in a:
            name, lib = a.split("=", 1)
            out.append(f"{name}={_placeholder(lib, 'LIBDIR')}")
        elif prev == "--model":
            out.append(_placeholder(a, "MODEL.gguf"))
        elif prev == "--corpus":
            out.append(_placeholder(a, "CORPUS.jsonl.gz"))
        else:
            out.append(a)
    return out


run = main
"""The entry of ``python -m bench llama_speed`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    main()
