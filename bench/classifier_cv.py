"""Cross-validated comparison of single/multi-document question classifiers (issue 4).

Usage (from the repository root; ~15 min on 2 idle CPU cores)::

    OMP_NUM_THREADS=1 PYTHONPATH=src python bench/classifier_cv.py [--questions .../dev.jsonl]
        [--llm-sample 200] [--no-llm] [--only NAME ...] [--cache-dir DIR]

(``OMP_NUM_THREADS=1``: the gradient-boosting candidate was 10-20x slower with OpenMP
threads on a shared 2-core machine.) With ``--cache-dir`` a rerun reuses every finished
candidate and LLM reply and only re-measures speed.

Protocol:

* 5 folds, stratified by label and grouped by gold documents (questions sharing a gold
  document never sit on both sides), seed 0: the SAME folds for every candidate.
* Learned candidates: fitted on 4 folds; their decision threshold is tuned for balanced
  accuracy by an inner 5-fold cross-validation on those 4 folds only
  (``TunedThresholdClassifierCV``), then applied to the held-out fold.
* The published rules have no parameters; "rules OR/AND learned" combine the held-out
  predictions.
* The LLM classifier (SmolLM2-135M-Instruct here, not the paper's Falcon3-10B) runs on a
  fixed stratified sample (default 200 questions, 100 per class, seed 0) only; the other
  classifiers are reported on the same sample for comparison.
* Speed of the shipped model (``src/preqrag/data/classifier.json``) and of the rules, via
  ``bench/classifier_speed.py``.

Writes ``docs/bench/classifier.json`` (docs/results/classifier.md shows it: ``python bench/results.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from harness import machine as harness_machine  # noqa: E402

from classifier_speed import measure  # noqa: E402

from preqrag.components.classifiers import CombinedClassifier, LearnedClassifier, LLMClassifier, RulesClassifier  # noqa: E402
from preqrag.components.classifiers.model import BUNDLED_MODEL, QuestionTypeModel  # noqa: E402
from preqrag.components.classifiers.train import (  # noqa: E402
    CANDIDATES, CHOSEN, SentenceEmbeddingFeatures, cross_validate, data_fingerprint, load_labelled, make_splits,
)
from preqrag.core.io import atomic_write_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.90


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def metrics(y: np.ndarray, pred: np.ndarray) -> dict:
    """Accuracy on gold-single, gold-multi, overall and balanced (mean of the two).

    A class absent from ``y`` has accuracy ``None`` (and so has ``balanced``).
    """
    s = round(float((pred[y == 0] == 0).mean()), 4) if (y == 0).any() else None
    m = round(float((pred[y == 1] == 1).mean()), 4) if (y == 1).any() else None
    return {"single": s, "multi": m, "overall": round(float((pred == y).mean()), 4),
            "balanced": None if s is None or m is None else round((s + m) / 2, 4),
            "n_single": int((y == 0).sum()), "n_multi": int((y == 1).sum())}


def by_field(questions, y: np.ndarray, pred: np.ndarray, field: str) -> dict:
    """Accuracy per value of a DataMorgana category (``answer_type``, ``phrasing``, ``premise``)."""
    values = np.asarray([str(q.extra.get(field)) for q in questions], dtype=object)
    out = {}
    for v in sorted(set(values)):
        mask = values == v
        r = metrics(y[mask], pred[mask])
        out[v] = {"n": int(mask.sum()), "accuracy": r["overall"], **{k: r[k] for k in ("single", "multi", "n_single", "n_multi")}}
    return out


def machine() -> dict:
    """:func:`harness.machine` plus the scikit-learn and numpy versions the classifiers ran with."""
    import sklearn

    return {**harness_machine(), "scikit_learn": sklearn.__version__, "numpy": np.__version__}


def run_llm_sample(data, y, preds: dict, sample_size: int, seed: int, threads: int | None,
                   cache_dir: Path | None) -> dict:
    """LLM, combined, rules and the chosen model on a fixed stratified sample."""
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm import load_llm

    rng = np.random.default_rng(seed)
    half = sample_size // 2
    idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), size=half, replace=False) for c in (0, 1)]))
    texts = [data.texts[i] for i in idx]
    cfg = LLMConfig(n_threads=threads, cache_dir=str(cache_dir) if cache_dir else None)
    llm = load_llm(cfg)
    t = time.perf_counter()
    llm_out = LLMClassifier(llm).classify(texts)
    llm_s = time.perf_counter() - t
    comb_out = CombinedClassifier(llm).classify(texts)  # greedy replies: same as above (cached)
    ys = y[idx]
    to01 = lambda cs: np.asarray([c.question_type == "multi" for c in cs], dtype=np.int64)  # noqa: E731
    fallbacks = [c.fallback for c in llm_out if c.fallback]
    llm_only = np.asarray([c.fallback is None for c in llm_out])
    res = {
        "sample": {"n": int(len(idx)), "seed": seed, "how": f"{half} gold-single + {half} gold-multi, numpy default_rng({seed}).choice"},
        "llm_model": cfg.model, "llm_threads": threads, "llm_seconds": round(llm_s, 1),
        "llm_calls_answered_from_cache": getattr(llm, "hits", 0),
        "llm_fallback_rate": round(len(fallbacks) / len(idx), 4), "llm_fallback_examples": fallbacks[:5],
        "results": {
            "llm (SmolLM2-135M, rules fallback)": metrics(ys, to01(llm_out)),
            "combined (llm OR rules)": metrics(ys, to01(comb_out)),
            "rules": metrics(ys, preds["rules"][idx]),
            CHOSEN: metrics(ys, preds[CHOSEN][idx]),
        },
    }
    if fallbacks and llm_only.any():
        res["results"]["llm, parsable replies only"] = metrics(ys[llm_only], to01(llm_out)[llm_only])
    return res


def summary(report: dict) -> dict:
    """Prose fields of ``report`` (what the old Markdown page said around its tables):
    ``summary`` (the target against the chosen model), ``evaluation`` (what each table is evaluated
    on) and, with speed figures, ``speed_method``."""
    c = report["candidates"][report["chosen"]]

    def short(x: float) -> str:
        return f" (short by {TARGET - x:.3f})" if x < TARGET else ""

    out = {
        "summary": (f"Target {TARGET:.2f} / {TARGET:.2f} is "
                    + ("reached" if c["single"] >= TARGET and c["multi"] >= TARGET else "not reached")
                    + f". The chosen model ({report['chosen']}, the default `learned`) gets {c['single']:.3f} on "
                    f"gold-single{short(c['single'])} and {c['multi']:.3f} on gold-multi{short(c['multi'])} in "
                    "cross-validation."),
        "evaluation": ("candidates: held-out predictions of the cross-validation on dev (protocol), except "
                       "`rules (published)`: all of dev, no fitting; chosen_by_field / rules_by_field: the chosen "
                       "model's held-out predictions and the rules by DataMorgana category; llm.results: the fixed "
                       "sample of llm.sample (its n_single + n_multi where replies were dropped)."),
    }
    if report.get("speed"):
        out["speed_method"] = (f"speed (this machine's CPU): all {report['speed'][0]['n_batched']} dev questions in one "
                               "`classify` call, best of 3 (questions_per_s_batched); one question: 300 "
                               "single-question calls (ms_single_median / ms_single_p95). Targets: >= 1,000 "
                               "questions/s batched and < 5 ms for one question. Loading the shipped model (1.5 MB "
                               "JSON) plus importing scikit-learn takes ~1 s once.")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Cross-validated comparison of question classifiers.")
    ap.add_argument("--questions", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "liverag-bench" / "dev.jsonl")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--llm-sample", type=int, default=200)
    ap.add_argument("--no-llm", action="store_true")
    ap.add_argument("--llm-threads", type=int, default=1,
                    help="llama.cpp threads (1: far faster than 2 when the 2 cores are shared)")
    ap.add_argument("--only", nargs="*", default=None, help="learned candidates to run (default: all)")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="keep each candidate's held-out predictions here and reuse them on a rerun")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "classifier.json")
    args = ap.parse_args(argv)

    data = load_labelled(args.questions)
    y = data.y
    splits = make_splits(y, data.groups, args.folds, args.seed)
    log(f"{len(y)} questions, folds of {[len(te) for _, te in splits]}")
    candidates: dict[str, dict] = {}
    preds: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}

    preds["rules"] = np.asarray([c.question_type == "multi" for c in RulesClassifier().classify(data.texts)], dtype=np.int64)
    candidates["rules (published)"] = metrics(y, preds["rules"])

    wanted = [c for c in CANDIDATES if args.only is None or c in args.only]
    if CHOSEN not in wanted:
        wanted.insert(0, CHOSEN)
    fingerprint = data_fingerprint(data.texts, y)[:16]

    def cache_file(cand: str) -> Path | None:
        return args.cache_dir / f"{cand}-{fingerprint}-seed{args.seed}-k{len(splits)}.json" if args.cache_dir else None

    if any("minilm" in c and not (cache_file(c) and cache_file(c).exists()) for c in wanted):
        t = time.perf_counter()
        SentenceEmbeddingFeatures().transform(data.texts)  # fill the cache once (no labels used)
        seconds["minilm embeddings (all questions, once)"] = round(time.perf_counter() - t, 1)
        log(f"embedded {len(y)} questions in {seconds['minilm embeddings (all questions, once)']} s")
    for cand in wanted:
        cached = cache_file(cand)
        if cached is not None and cached.exists():
            obj = json.loads(cached.read_text(encoding="utf-8"))
            preds[cand], seconds[cand] = np.asarray(obj["pred"], dtype=np.int64), obj["seconds"]
        else:
            t = time.perf_counter()
            _, preds[cand] = cross_validate(cand, data.texts, y, data.groups, splits, args.seed, progress=log)
            seconds[cand] = round(time.perf_counter() - t, 1)
            if cached is not None:
                atomic_write_text(cached, json.dumps({"pred": preds[cand].tolist(), "seconds": seconds[cand]}))
        candidates[cand] = metrics(y, preds[cand])
        log(f"{cand}: {candidates[cand]} ({seconds[cand]} s)")
    candidates[f"rules OR {CHOSEN}"] = metrics(y, preds["rules"] | preds[CHOSEN])
    candidates[f"rules AND {CHOSEN}"] = metrics(y, preds["rules"] & preds[CHOSEN])

    report: dict = {
        "command": "".join(f"{k}={os.environ[k]} " for k in ("OMP_NUM_THREADS",) if k in os.environ)
                   + "PYTHONPATH=src python bench/classifier_cv.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "data": {"file": str(args.questions), "n_single": int((y == 0).sum()), "n_multi": int((y == 1).sum()),
                 "sha256_of_questions_and_labels": data_fingerprint(data.texts, y)},
        "protocol": (f"{len(splits)}-fold cross-validation, stratified by label and grouped by gold documents, "
                     f"seed {args.seed}, the same folds for every candidate; each learned candidate's threshold "
                     "is tuned for balanced accuracy by an inner 5-fold CV inside the training folds "
                     "(TunedThresholdClassifierCV), never on the held-out fold."),
        "target": {"single": TARGET, "multi": TARGET},
        "chosen": CHOSEN,
        "candidates": candidates,
        "chosen_by_field": {f: by_field(data.questions, y, preds[CHOSEN], f) for f in ("answer_type", "phrasing", "premise")},
        "rules_by_field": {f: by_field(data.questions, y, preds["rules"], f) for f in ("answer_type", "phrasing", "premise")},
        "cv_seconds": seconds,
    }
    if not args.no_llm:
        log(f"LLM classifier on a sample of {args.llm_sample}")
        report["llm"] = run_llm_sample(data, y, preds, args.llm_sample, args.seed, args.llm_threads,
                                       args.cache_dir / "llm" if args.cache_dir else None)
        log(json.dumps(report["llm"]["results"]))

    if BUNDLED_MODEL.exists():
        shipped = QuestionTypeModel.load()
        report["shipped_model"] = {"path": str(BUNDLED_MODEL.relative_to(ROOT)), "bytes": BUNDLED_MODEL.stat().st_size,
                                   "threshold": shipped.threshold, "metadata": shipped.metadata,
                                   "trained_on_this_data": shipped.metadata.get("data_sha256") == report["data"]["sha256_of_questions_and_labels"]}
        load_before = os.getloadavg()[0]
        report["speed"] = [measure(LearnedClassifier(), data.texts), measure(RulesClassifier(), data.texts)]
        for s in report["speed"]:
            s["load_average_1min_before"] = round(load_before, 2)
        log(f"speed: {report['speed']}")
    best_bal = max(v["balanced"] for k, v in candidates.items())
    report["assessment"] = (
        f"No candidate reaches it: the best balanced accuracy is {best_bal:.3f}. The combinations of n-grams, "
        "structural features, sentence embeddings and gradient boosting all land at 0.80-0.83 balanced accuracy, and the "
        "errors suggest why: DataMorgana's labels say "
        "how many documents a question was generated from, not how it reads (e.g. 'what the difference yellow mustard vs dijon mustard' is "
        "single-document, 'What museums can you visit in Greece to see ancient artifacts?' is multi-document); "
        "'three-doc' questions (0.62 recall) and many 'multi-aspect' ones read like single-document questions. "
        "Reaching 0.90 / 0.90 would likely need information beyond the question text (e.g. retrieval evidence).")
    report["notes"] = [
        "Hyper-parameters (n-gram ranges, C=1, structural weight 0.1) were picked by a handful of earlier 5-fold runs on "
        "this same dev set, so the CV figures may be slightly optimistic (ungrouped folds gave ~0.01 higher balanced "
        "accuracy than the grouped folds used here); the held-out set will tell.",
        "Embedding candidates (all-MiniLM-L6-v2) are not shippable under the speed target: ~60 questions/s and ~80 ms per "
        "question on this 2-core CPU, against >= 1,000/s and < 5 ms; they are also less accurate here.",
        "The LLM figures use SmolLM2-135M-Instruct (the project's CPU default), not the paper's Falcon3-10B-Instruct "
        "(Table 1: 0.822 / 0.730 on the authors' data), on a 200-question sample only; unparsable replies fall back to "
        "the rules, and the fallback rate is reported.",
        "SmolLM2-135M answers 'multi' for almost every question once its replies are one word (few-shot prompt), so "
        "'llm' and 'combined' are far below the rules here; they exist for paper fidelity and for a stronger LLM "
        "(e.g. the openai backend serving Falcon3-10B). Its speed on this shared 2-core machine: ~2.4 s per question "
        "with 1 llama.cpp thread at load average ~4 (490 s for the 200 calls of the first run; later runs read the "
        "replies from the --cache-dir LLM cache, hence llm_seconds 0 in classifier.json).",
        "'combined' is implemented as multi if the rules OR the LLM say multi (the paper does not say how it combined them).",
        "The shipped model is trained on all of dev.jsonl with `preqrag train-classifier ../shared/liverag-bench/dev.jsonl "
        "-o src/preqrag/data/classifier.json --seed 0`; its threshold is tuned by grouped inner CV the same way.",
    ]
    report.update(summary(report))
    atomic_write_text(args.out, json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    log(f"wrote {args.out}")
    return 0


run = main
"""The entry of ``python -m bench classifier_cv`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    main()
