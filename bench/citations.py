"""Citation precision and recall of TREC RAG exports against gold documents (issue 13, section 2).

Usage (from the repository root; ~15 min on 2 idle CPU cores, most of it ``preqrag run``;
``--step calibrate`` / ``--step measure`` run the two steps below separately)::

    preqrag index --corpus ../shared/liverag-bench/smoke_corpus.jsonl.gz --index /tmp/trec_smoke_idx
    printf 'pipeline = "hybrid"\n' > /tmp/hybrid.toml
    preqrag run --index /tmp/trec_smoke_idx ../shared/liverag-bench/smoke.jsonl -o /tmp/trec_smoke_run/answers.jsonl \
        --config /tmp/hybrid.toml
    PYTHONPATH=src python bench/citations.py --index /tmp/trec_smoke_idx \
        --answers /tmp/trec_smoke_run/answers.jsonl --run-config /tmp/hybrid.toml

(``hybrid``: the default models without LLM rewriting, so the run costs one LLM call per
question; any preset's answers can be measured, ``--run-config`` only records which.)

How citations are scored. An answer's citations point at passages; a passage belongs to one
document (``<doc id>#<n>``). Per answer, with C = the set of passages it cites and G = its
question's gold documents (``gold_doc_ids`` of ``smoke.jsonl``):

* precision = |{p in C : doc(p) in G}| / |C| — cited passages whose document is gold;
* recall = |{g in G : some p in C has doc(p) = g}| / |G| — gold documents cited at least once;

both micro-averaged over answers (sums of numerators over sums of denominators; an answer
citing nothing adds to recall's denominator only), with F1 = their harmonic mean. Gold
documents are the documents the question was generated from (DataMorgana), so a passage of
another document may support a sentence too: precision is a lower bound. Recall cannot
exceed the share of gold documents in the context (``context recall``, reported beside).

Steps:

1. **calibrate** the attribution threshold (:data:`preqrag.components.citations.DEFAULT_THRESHOLD`) on
   questions disjoint from the ones measured: the dev questions (``dev.jsonl``, not in
   ``smoke.jsonl``) whose gold documents are all in the smoke corpus and are no smoke
   question's gold document; their *reference* answers are split into sentences and
   attributed to the top-6 passages the ``hybrid`` preset retrieves from the smoke index
   (``generator.context_top_k = 6``: more non-gold candidates than the default 3;
   ``cross_encoder.depth = 12``). The
   threshold with the best F1 over the grid -6.0 .. 8.0 (step 0.5) is chosen.
2. **measure** on the 60 smoke questions, with the chosen threshold:
   * the system's answers (``--answers``, from ``preqrag run`` with ``--run-config``), exported with
     ``preqrag export --format trec-rag24`` (the real command, in a subprocess) and read back
     from the run file;
   * the smoke *reference* answers attributed to the same contexts (attribution alone,
     without the 135M generator's errors);
   * two baselines on the same answers: every sentence cites every context passage, and every
     sentence cites only its best-scoring passage (no threshold).
3. **reference**: all 60 smoke reference answers attributed to the top-3 passages of the
   ``hybrid`` preset (rerank depth 12), by number of gold documents: the attribution alone on
   every smoke question (the calibration questions are nearly all single-document ones).

Writes ``docs/bench/citations.json`` (docs/results/citations.md shows it: ``python bench/results.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness import machine  # noqa: E402

from preqrag.components.citations import DEFAULT_THRESHOLD, Attributor, load_attributor, split_sentences  # noqa: E402
from preqrag.core.io import atomic_write_text  # noqa: E402
from preqrag.core.records import doc_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT.parent / "shared" / "liverag-bench"
GRID = [round(x, 1) for x in np.arange(-6.0, 8.01, 0.5)]
CAL_CONTEXT = 6
"""Calibration context: the top 6 passages (the default preset gives the LLM 3)."""
CAL_DEPTH = 12
"""Calibration rerank depth (default 30; fewer cross-encoder calls on a shared 2-core machine)."""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def score_citations(items: list[tuple[list[list[str]], list[str]]]) -> dict:
    """Micro precision / recall / F1 of citations.

    Args:
        items: per answer, ``(per sentence: cited passage ids, gold document ids)``.
    """
    tp = cited = gold_hit = gold = 0
    for cites, gold_docs in items:
        c = {p for cs in cites for p in cs}
        g = set(gold_docs)
        cited += len(c)
        tp += sum(doc_of(p) in g for p in c)
        gold += len(g)
        gold_hit += len(g & {doc_of(p) for p in c})
    p = tp / cited if cited else 0.0
    r = gold_hit / gold if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "answers": len(items),
            "cited_passages": cited, "gold_documents": gold}


def context_recall(contexts: list[list[str]], golds: list[list[str]]) -> float:
    """Share of gold documents with a passage in the context (the ceiling of recall)."""
    hit = sum(len(set(g) & {doc_of(p) for p in ctx}) for ctx, g in zip(contexts, golds))
    return round(hit / sum(len(g) for g in golds), 4)


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def calibration_questions() -> list[dict]:
    smoke = load_jsonl(BENCH / "smoke.jsonl")
    smoke_ids = {q["id"] for q in smoke}
    smoke_gold = {g for q in smoke for g in q["gold_doc_ids"]}
    with gzip.open(BENCH / "smoke_corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = {json.loads(line)["id"] for line in fh}
    return [q for q in load_jsonl(BENCH / "dev.jsonl")
            if q["id"] not in smoke_ids and all(g in docs for g in q["gold_doc_ids"])
            and not set(q["gold_doc_ids"]) & smoke_gold]


def reference_items(index: Path, cfg, qs: list[dict]) -> tuple[list, list]:
    """Retrieve each question's context with ``cfg`` (8 at a time) and pair its reference answer's
    sentences with the context passages' texts: ``(traces, [(sentences, passage texts)])``."""
    from preqrag.run.pipeline import Pipeline
    from preqrag.core.records import Question

    pipeline = Pipeline.from_config(index, cfg)
    traces = []
    for i in range(0, len(qs), 8):
        traces += pipeline.retrieve([Question(id=q["id"], question=q["question"]) for q in qs[i:i + 8]])
    texts = pipeline.index.text
    return traces, [(split_sentences(q["answer"]), [texts(pid) for pid in t.context_ids]) for q, t in zip(qs, traces)]


def calibrate(index: Path, attributor: Attributor) -> dict:
    from preqrag.core.config import load_config

    qs = calibration_questions()
    log(f"calibration: {len(qs)} dev questions")
    cfg = load_config(None, pipeline="hybrid", overrides={"generator": {"context_top_k": CAL_CONTEXT},
                                                          "cross_encoder": {"depth": CAL_DEPTH}})
    traces, items = reference_items(index, cfg, qs)
    t0 = time.perf_counter()
    scores = attributor.scores(items)
    secs = time.perf_counter() - t0
    pairs = sum(s.size for s in scores)
    log(f"calibration: {pairs} (sentence, passage) pairs scored in {secs:.1f}s")
    rows = []
    for thr in GRID:
        a = Attributor(attributor.scorer, threshold=thr, max_per_sentence=attributor.max_per_sentence)
        cites = [[[t.context_ids[j] for j in row] for row in a.cite(s)] for s, t in zip(scores, traces)]
        rows.append({"threshold": thr, **score_citations([(c, q["gold_doc_ids"]) for c, q in zip(cites, qs)])})
    best = max(rows, key=lambda r: (r["f1"], -abs(r["threshold"])))
    return {"questions": len(qs), "context_top_k": CAL_CONTEXT, "rerank_depth": CAL_DEPTH, "pairs": pairs, "seconds_scoring": round(secs, 1),
            "context_recall": context_recall([t.context_ids for t in traces], [q["gold_doc_ids"] for q in qs]),
            "grid": rows, "best": best}


def reference_all(index: Path, attributor: Attributor) -> dict:
    """All smoke reference answers attributed to the top-3 passages of the ``hybrid`` preset
    (rerank depth 12): attribution quality on every smoke question, without the generator."""
    from preqrag.core.config import load_config

    qs = load_jsonl(BENCH / "smoke.jsonl")
    cfg = load_config(None, pipeline="hybrid", overrides={"cross_encoder": {"depth": CAL_DEPTH}})
    traces, items = reference_items(index, cfg, qs)
    cites = attributor.attribute_many(items)
    golds = [q["gold_doc_ids"] for q in qs]
    res = {"questions": len(qs), "context_top_k": cfg.generator.context_top_k, "rerank_depth": CAL_DEPTH,
           "context_recall": context_recall([t.context_ids for t in traces], golds),
           "all": score_citations([([[t.context_ids[j] for j in row] for row in cs], g)
                                   for cs, t, g in zip(cites, traces, golds)])}
    for n in (1, 2):
        sel = [i for i, q in enumerate(qs) if q["n_gold"] == n]
        res[f"n_gold_{n}"] = score_citations([([[traces[i].context_ids[j] for j in row] for row in cites[i]], golds[i])
                                              for i in sel])
        res[f"n_gold_{n}"]["context_recall"] = context_recall([traces[i].context_ids for i in sel],
                                                              [golds[i] for i in sel])
    return res


def measure(answers: Path, threshold: float, cache_dir: Path) -> dict:
    from preqrag.trec.export import read_run

    smoke = {q["id"]: q for q in load_jsonl(BENCH / "smoke.jsonl")}
    rows, problems = read_run(answers)
    if problems:
        raise SystemExit(f"{answers}: {problems[0]}")
    golds = [smoke[str(a.id)]["gold_doc_ids"] for _, a, _ in rows]
    contexts = [list(t.context_ids) for _, _, t in rows]
    out: dict = {"answers_file": str(answers), "questions": len(rows), "smoke_questions": len(smoke),
                 "context_top_k": max(len(c) for c in contexts),
                 "context_recall": context_recall(contexts, golds)}

    # the real command: preqrag export, then the run file is read back. Cross-encoder scores are
    # cached in cache_dir, so the baselines below re-use the export's scores.
    attributor = load_attributor(threshold=threshold, cache_dir=str(cache_dir))
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.jsonl"
        cfg = Path(tmp) / "cache.toml"
        cfg.write_text(f'[run]\ncache_dir = "{cache_dir}"\n', encoding="utf-8")
        cmd = [sys.executable, "-m", "preqrag.cli", "export", "--format", "trec-rag24", str(answers), "-o", str(run),
               "--run-id", "smoke", "--threshold", str(threshold), "--config", str(cfg)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        out["export_seconds"] = round(time.perf_counter() - t0, 1)
        recs = {r["topic_id"]: r for r in load_jsonl(run)}
        check = subprocess.run([sys.executable, "-m", "preqrag.cli", "validate", str(run)], capture_output=True,
                               text=True)
        out["validate_exit_code"] = check.returncode
    system = []
    for _, a, _ in rows:
        r = recs[str(a.id)]
        system.append(([[r["references"][c] for c in s["citations"]] for s in r["answer"]], smoke[str(a.id)]["gold_doc_ids"]))
    out["system_answers"] = score_citations(system)
    out["system_sentences"] = sum(len(r["answer"]) for r in recs.values())
    out["system_uncited_sentences"] = sum(not s["citations"] for r in recs.values() for s in r["answer"])

    # baselines on the same system answers
    sents = [split_sentences(a.answer) for _, a, _ in rows]
    out["baseline_cite_all_context"] = score_citations(
        [([list(c) for _ in s] or [[]], g) for s, c, g in zip(sents, contexts, golds)])
    items = [(s, [p.passage for p in a.passages]) for s, (_, a, _) in zip(sents, rows)]
    top1 = Attributor(attributor.scorer, threshold=-np.inf, max_per_sentence=1)
    cites = top1.attribute_many(items)
    out["baseline_top1_per_sentence"] = score_citations(
        [([[c[j] for j in row] for row in cs], g) for cs, c, g in zip(cites, contexts, golds)])

    # reference answers attributed to the same contexts
    ref_items = [(split_sentences(smoke[str(a.id)]["answer"]), [p.passage for p in a.passages]) for _, a, _ in rows]
    ref = Attributor(attributor.scorer, threshold=threshold, max_per_sentence=attributor.max_per_sentence)
    ref_cites = ref.attribute_many(ref_items)
    out["reference_answers"] = score_citations(
        [([[c[j] for j in row] for row in cs], g) for cs, c, g in zip(ref_cites, contexts, golds)])
    return out


def with_notes(res: dict) -> dict:
    """``res`` with what its figures mean, as prose fields (``method``, ``calibration_note``,
    ``measure_note``, ``reference_note``) for the parts it has: docs/results/citations.md shows them."""
    res["method"] = (
        "Precision = cited passages whose document is gold / cited passages; recall = gold documents cited at "
        "least once / gold documents; micro-averaged over answers (bench/citations.py docstring). Attribution: "
        "each answer sentence (pysbd) is scored against every context passage by the bundled cross-encoder "
        "(ms-marco-MiniLM-L-12-v2, ONNX int8); a sentence cites the passages scoring at least the threshold, "
        f"best first, at most {res.get('max_per_sentence', 3)}. Gold documents are the documents each question was "
        "generated from; a passage of another document may support a sentence as well, so precision is a lower "
        "bound; recall is bounded by the context recall.")
    cal = res.get("calibration")
    if cal:
        res["calibration_note"] = (
            f"Threshold calibration (calibration.grid): {cal['questions']} dev questions (not smoke questions, gold "
            "documents in the smoke corpus and disjoint from the smoke questions' gold documents); their reference "
            f"answers attributed to the top-{cal['context_top_k']} passages of the `hybrid` preset on the smoke "
            f"index, rerank depth {cal.get('rerank_depth')} ({cal['best']['gold_documents']} gold documents: "
            f"{cal['best']['gold_documents'] - cal['questions']} of the questions have two, the others one); "
            f"{cal['pairs']} pairs scored in {cal['seconds_scoring']} s on the shared machine. Chosen: threshold "
            f"{cal['best']['threshold']} (best F1), shipped as `preqrag.components.citations.DEFAULT_THRESHOLD`.")
    m = res.get("measure")
    if m:
        res["measure_note"] = (
            f"Smoke questions (measure): {m['questions']} smoke questions"
            + (f" (the first {m['questions']} of {m['smoke_questions']}: the run was stopped there for time on a "
               "shared 2-core machine)" if m["questions"] < m["smoke_questions"] else "")
            + f" answered by `preqrag run` (preset `{m['preset']}`, context of {m['context_top_k']} passages), "
            f"exported with `preqrag export --format trec-rag24` at threshold {res['threshold']}; the system's "
            "answers attributed (system_answers), two baselines on the same answers (every sentence cites every "
            "context passage; every sentence cites its best passage, no threshold) and the smoke reference answers "
            "attributed to the same contexts (reference_answers). The baselines give every sentence a citation, "
            "supported or not; precision and recall at the answer level do not penalise citing a gold passage for "
            "a sentence it does not support, so they favour the baselines on a generator (here the bundled 135M "
            "model) whose sentences are often unsupported or repeated."
            + (f" {m['questions']} answers are a small sample: read these rows as indicative."
               if m["questions"] < 30 else ""))
    ra = res.get("reference_all")
    if ra:
        res["reference_note"] = (
            f"All smoke reference answers (reference_all): the {ra['questions']} reference answers of `smoke.jsonl` "
            f"attributed at threshold {res.get('threshold')} to the top-{ra['context_top_k']} passages of the "
            f"`hybrid` preset (rerank depth {ra['rerank_depth']}): attribution alone, on every smoke question, "
            "without the generator; n_gold_1 / n_gold_2: the questions with one / two gold documents.")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", type=Path, required=True, help="Smoke index (preqrag index on smoke_corpus).")
    ap.add_argument("--answers", type=Path, help="preqrag run answers on smoke.jsonl (not for --step calibrate).")
    ap.add_argument("--run-config", type=Path, help="The --config the answers were made with (recorded).")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "citations")
    ap.add_argument("--step", choices=["all", "calibrate", "reference", "measure"], default="all", help=(
        "calibrate only (writes the JSON without the smoke figures), measure only (reuses the calibration "
        "in the JSON), or both."))
    args = ap.parse_args(argv)
    attributor = load_attributor()  # max_per_sentence; the calibration's scorer
    if args.step in ("measure", "reference"):
        cal = json.loads(args.out.with_suffix(".json").read_text())["calibration"]
    else:
        cal = calibrate(args.index, attributor)
    chosen = cal["best"]["threshold"]
    if chosen != DEFAULT_THRESHOLD:
        log(f"NOTE: calibrated threshold {chosen} != preqrag.components.citations.DEFAULT_THRESHOLD {DEFAULT_THRESHOLD}; "
            "measuring with the calibrated one (update DEFAULT_THRESHOLD)")
    if args.step == "reference":
        old = json.loads(args.out.with_suffix(".json").read_text())
        old["reference_all"] = reference_all(args.index, Attributor(attributor.scorer, threshold=chosen))
        atomic_write_text(args.out.with_suffix(".json"), json.dumps(with_notes(old), indent=2) + "\n")
        log(f"reference answers: {old['reference_all']['all']}")
        return 0
    if args.step == "calibrate":
        atomic_write_text(args.out.with_suffix(".json"), json.dumps({"calibration": cal}, indent=2) + "\n")
        log(f"calibrated: threshold {chosen} (F1 {cal['best']['f1']}); wrote {args.out}.json")
        return 0
    with tempfile.TemporaryDirectory() as cache:
        m = measure(args.answers, chosen, Path(cache))
    preset = "preqrag"
    if args.run_config is not None:
        from preqrag.core.config import load_config

        preset = load_config(args.run_config).pipeline
    m["preset"] = preset
    cfg_arg = f" --config {args.run_config}" if args.run_config else ""
    res = {"date": dt.date.today().isoformat(), "machine": machine(), "threshold": chosen,
           "default_threshold": DEFAULT_THRESHOLD, "max_per_sentence": attributor.max_per_sentence,
           "commands": {"setup": [
               f"preqrag index --corpus ../shared/liverag-bench/smoke_corpus.jsonl.gz --index {args.index}",
               f"preqrag run --index {args.index} ../shared/liverag-bench/smoke.jsonl -o {args.answers}{cfg_arg}"],
               "calibrate": f"PYTHONPATH=src python bench/citations.py --index {args.index} --step calibrate",
               "reference": f"PYTHONPATH=src python bench/citations.py --index {args.index} --step reference",
               "measure": f"PYTHONPATH=src python bench/citations.py --index {args.index} --answers {args.answers}"
                          + (f" --run-config {args.run_config}" if args.run_config else "") + " --step measure"},
           "calibration": cal, "measure": m}
    if args.out.with_suffix(".json").exists():
        old = json.loads(args.out.with_suffix(".json").read_text())
        if "reference_all" in old:
            res["reference_all"] = old["reference_all"]
    if args.step == "all":
        res["reference_all"] = reference_all(args.index, Attributor(attributor.scorer, threshold=chosen))
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(with_notes(res), indent=2) + "\n")
    log(f"wrote {args.out}.json")
    return 0


run = main
"""The entry of ``python -m bench citations`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
