"""Speed of the question classifiers on CPU: questions/s batched and ms for one question.

Usage::

    PYTHONPATH=src python bench/classifier_speed.py [--questions liverag-bench/dev.jsonl]

Prints a JSON object. ``bench/classifier_cv.py`` calls :func:`measure` and stores the result
in ``docs/bench/classifier.json``. Targets (issue 4): >= 1,000 questions/s batched and
< 5 ms for one question.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

DEFAULT_QUESTIONS = Path(__file__).resolve().parent.parent.parent / "shared" / "liverag-bench" / "dev.jsonl"


def measure(clf, questions: list[str], repeats: int = 3, n_single: int = 300) -> dict:
    """Time ``clf.classify``.

    Batched: the whole list in one call, best of ``repeats`` (after one warm-up call that
    also loads the model, whose time is reported separately). Single: ``n_single``
    one-question calls, median and 95th percentile.
    """
    t0 = time.perf_counter()
    clf.classify(questions[:1])
    load_s = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        clf.classify(questions)
        best = min(best, time.perf_counter() - t)
    lat = []
    for q in questions[:n_single]:
        t = time.perf_counter()
        clf.classify([q])
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    return {
        "classifier": clf.name, "n_batched": len(questions), "questions_per_s_batched": len(questions) / best,
        "ms_single_median": statistics.median(lat), "ms_single_p95": lat[int(0.95 * (len(lat) - 1))],
        "first_call_load_s": load_s,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    args = ap.parse_args(argv)
    from preqrag.components.classifiers import LearnedClassifier, RulesClassifier
    from preqrag.core.io import read_questions

    qs, _ = read_questions(args.questions)
    texts = [q.question for q in qs]
    print(json.dumps([measure(LearnedClassifier(), texts), measure(RulesClassifier(), texts)], indent=2))
    return 0


run = main
"""The entry of ``python -m bench classifier_speed`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    main()
