"""Summarise per-stage seconds of a run: python bench/stage_seconds.py answers.traces.jsonl

Prints mean / median / max seconds per question for every stage recorded in the traces
(``Trace.seconds``: batch time divided by the batch size), the number of questions with a
fallback, and how many were classified multi-document.
"""

import argparse
import json
import statistics as st


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", help="a run's traces file (ANSWERS.traces.jsonl)")
    args = ap.parse_args(argv)
    traces = [json.loads(line) for line in open(args.traces, encoding="utf-8")]
    print(len(traces), "questions")
    for stage in sorted({s for t in traces for s in t["seconds"]}):
        v = [t["seconds"].get(stage, 0.0) for t in traces]
        print(f"{stage:10s} mean {st.mean(v):.3f}  median {st.median(v):.3f}  max {max(v):.3f}")
    print("total mean", round(st.mean(sum(t["seconds"].values()) for t in traces), 3))
    print("questions with a fallback", sum(bool(t["fallbacks"]) for t in traces))
    print("predicted multi", sum(t["classification"]["question_type"] == "multi" for t in traces))
    return 0


run = main
"""The entry of ``python -m bench stage_seconds`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
