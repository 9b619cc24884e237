"""Requantize a GGUF model to another llama.cpp type with llama-cpp-python's own
``llama_model_quantize`` (:func:`preqrag.models.llm.llamacpp.requantize`; the input may already be
quantized), e.g. the installed Qwen2.5-Coder-1.5B Q4_K_M to Q4_0 for bench/llama_speed.py and bench/answers.py
(docs/models.md: a second lossy 4-bit rounding, measured, not shipped).

    python bench/requantize.py IN.gguf OUT.gguf [--type Q4_0] [--threads 2]
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", default="Q4_0", help="llama.cpp file type: LLAMA_FTYPE_MOSTLY_<TYPE> (Q4_0, Q8_0, ...)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    from preqrag.models.llm.llamacpp import requantize

    t0 = time.perf_counter()
    try:
        requantize(args.src, args.dst, args.type, threads=args.threads)
    except RuntimeError as e:
        print(e)
        return 1
    print(f"requantized to {args.type.upper()} in {time.perf_counter() - t0:.1f} s: {args.dst}")
    return 0


run = main
"""The entry of ``python -m bench requantize`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
