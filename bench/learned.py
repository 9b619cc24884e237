"""Issue 14: cross-validated gains of the learned ranker and the fine-tuned encoder, written to
docs/bench/learned.json (docs/results/learned.md shows it).

Questions: the same fixed-seed sample as bench/ablation.py (``random.Random(0).sample`` of the file,
``--sample``), those with gold documents. Folds: ``--folds`` K, scikit-learn ``GroupKFold`` on the
connected components of questions sharing a gold document (preqrag.learned.train.folds_of), so no
document is in both a training and a test fold. Every learned figure is on held-out folds; each
fold's model is checked against its test questions (preqrag.learned.guard) before it is scored.

Rows (ablation columns + ``cross_validated``; quality of the ``final`` ranking at document level):
  hybrid-rerank           the ladder's row (BM25 + dense, union, cross-encoder; no training)
  learned-ranker          + [merge] name = "learned" (LambdaMART trained on the other folds)
  dense-raw               dense retrieval only, base encoder            (--encoder)
  dense-raw-tuned         dense only, encoder fine-tuned on the other folds (--encoder)
  hybrid-rerank-tuned     hybrid-rerank with the fine-tuned encoder's dense retrieval (--encoder)
  both                    fine-tuned encoder + learned ranker (--encoder)
With ``--encoder-eval reindex`` the corpus is re-indexed with each fold's encoder (about 95 min per
fold for the bench corpus on 2 CPU cores) and the "both" ranker is trained on the tuned index's
traces. With ``--encoder-eval pool`` (default) the tuned encoder searches a pool of each fold's
first-stage candidates (the top ``--pool-depth`` BM25 and base-dense passages of every test question,
re-encoded: minutes), and "both" applies the fold's ranker trained on base traces; see _pool_rows.
Also per learned row: training wall seconds and peak RSS (each ranker fold trains in a spawned
child process: peak = the largest child's max RSS; the encoder trains in the bench process: peak = that
process's max RSS, retrieval models included), and for the ranker its query-time cost in ms/question (feature
extraction + Booster.predict, and predict alone).

Usage:
  python bench/learned.py --index IDX --questions dev.jsonl [--corpus corpus.jsonl.gz --encoder]
         [--sample 500] [--folds 5] [--workdir bench_work/learned] [--label NAME] [--out docs/bench/learned.json]
Retrieval traces, fold models and fold indexes are kept in --workdir: a killed run resumes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import random
import resource
import sys
import time
from pathlib import Path

from harness import final_retrieval_columns, machine  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.evaluation.retrieval import gold_docs  # noqa: E402
from preqrag.core.io import atomic_write_text, read_questions  # noqa: E402
from preqrag.learned.guard import check_traces  # noqa: E402
from preqrag.learned.ranker import LearnedMerge, RankerParams  # noqa: E402
from preqrag.learned.train import collect_traces, fit, folds_of, training_config  # noqa: E402
from preqrag.run.pipeline import Pipeline  # noqa: E402

HYBRID_RERANK = {"rewriter": {"name": "none"}}
DENSE_RAW = {"rewriter": {"name": "none"}, "retrieval": {"use_sparse": False}, "cross_encoder": {"name": "none"}}


NOTE = ("Quality of the final ranking at document level on held-out folds (GroupKFold over questions sharing gold "
        "documents); rows without training are scored on the same questions. Training time and peak RSS per fold "
        "(training_* for the ranker, encoder_training_* for the encoder); ranker_ms_per_question = feature "
        "extraction + LightGBM predict, ranker_predict_ms_per_question = predict alone.")
"""What the rows mean (written into the JSON; docs/results/learned.md shows it)."""


def _config(base, overrides, embedder=None):
    ov = {k: dict(v) for k, v in overrides.items()}
    if embedder:
        ov.setdefault("embedder", {})["name"] = embedder
    return training_config(load_config(base, ov, pipeline="preqrag"))  # rows are changes to PreQRAG, as the ladder


def _retrieve(index, cfg, qs, cache, batch_size, dense=None):
    """Traces of ``qs`` (resumable through ``cache``) and seconds per question; ``dense``: a dense
    retriever that replaces the index's (the ``--encoder-eval pool`` rows)."""
    pipeline = Pipeline.from_config(index, cfg)
    if dense is not None:  # a pipeline fixes its retrievers when built: build it again over the swapped index
        p = pipeline
        p.index.dense = dense
        pipeline = Pipeline(p.index, cfg, p.classifier, p.rewriter, p.fusion, p.rerank_chain, p.generator, p.llm,
                            merge=p.merge, ctx=p.ctx)
        pipeline.rerank_names = p.rerank_names
        assert any(r is dense for _, r, _, _ in pipeline.retrievers), "the tuned dense retriever is not searched"
    pipeline.warm_up()  # model loading is not per-question time
    t0 = time.perf_counter()
    n0 = sum(1 for _ in open(cache)) - 1 if Path(cache).exists() else 0
    traces = collect_traces(pipeline, qs, cache, batch_size=batch_size)
    fresh = len(qs) - max(n0, 0)
    spq = (time.perf_counter() - t0) / fresh if fresh > 0 else None
    if spq is None:  # all cached: the traces' own per-stage seconds
        spq = sum(sum(t.seconds.values()) for t in traces.values()) / len(traces)
    return traces, round(spq, 4)


def _fit_child(args):
    qs, traces, params, path = args
    t0 = time.perf_counter()
    sha = fit(qs, traces, params).save(path)
    return sha, time.perf_counter() - t0


def _train_in_child(fn, args):
    """Run ``fn(args)`` in a fresh (spawned) child process, so that its peak memory is its own; returns
    (result, peak RSS MB of the children so far)."""
    with mp.get_context("spawn").Pool(1) as pool:
        result = pool.apply(fn, (args,))
    return result, round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)


def apply_ranker(model_path, qs, traces):
    """Traces whose final ranking is the learned merge's; ms/question of the merge and of predict."""
    merge = LearnedMerge(model_path)
    out, merge_s, predict_s = {}, 0.0, 0.0
    predict = merge.ranker.score

    def timed_score(X):
        nonlocal predict_s
        t = time.perf_counter()
        s = predict(X)
        predict_s += time.perf_counter() - t
        return s

    merge.ranker.score = timed_score
    for q in qs:
        t = traces[q.key]
        finals = t.rankings.get("reranked") or t.rankings.get("merged")
        t0 = time.perf_counter()
        ((final, extra),) = merge.merge([q.question], [t.classification], [t.rankings], [finals])
        merge_s += time.perf_counter() - t0
        rankings = {k: v for k, v in t.rankings.items() if k != "final"}
        rankings["final"] = [final.top(100)]
        rankings.update({k: [r.top(100) for r in v] for k, v in extra.items()})
        out[q.key] = t.model_copy(update={"rankings": rankings, "learned_models": [merge.identity]})
    return out, 1000 * merge_s / max(len(qs), 1), 1000 * predict_s / max(len(qs), 1)


def _pool_rows(args, base_traces, dense_traces, test_qs, model_dir, work):
    """The tuned encoder's rows of one fold without re-indexing the corpus (``--encoder-eval pool``).

    The pool is the union, over the fold's test questions, of the top-``--pool-depth`` BM25 and
    base-dense passages (from the base traces), re-encoded with the fold's fine-tuned encoder into a
    flat FAISS index. Dense retrieval of the test questions searches that pool (dense-raw-tuned), and
    hybrid-rerank-tuned is the ladder's pipeline with its dense retriever replaced by the pool search
    (BM25 over the whole index as before). Check: the base encoder over the same pool returns its
    full-corpus top-10 exactly (its top-D passages are in the pool), asserted below. For the tuned
    encoder the pool can only help: passages outside it, which it might rank high, are never
    candidates. Returns (dense traces, s/q, hybrid traces, s/q, pool passages).
    """
    import numpy as np

    from preqrag.core.config import EmbedderConfig
    from preqrag.models.encoders import load_encoder
    from preqrag.index.embedded import Index
    from preqrag.retrieval.dense import DenseRetriever, build_faiss

    depth = args.pool_depth
    work.mkdir(parents=True, exist_ok=True)
    pool = sorted({pid for q in test_qs for key in ("sparse", "dense")
                   for r in base_traces[q.key].rankings.get(key, []) for pid in r.ids[:depth]})
    index = Index.open(args.index, _config(args.config, DENSE_RAW))
    row_of = {pid: i for i, pid in enumerate(index.passage_ids)}
    rows = np.array([row_of[pid] for pid in pool], dtype=np.int64)

    # the check: base vectors of the pool rows, base query vectors -> the full-corpus dense top-10
    base_path = work / "base.faiss"
    build_faiss(index.dense.faiss_index.reconstruct_batch(rows).astype(np.float32), base_path)
    got = DenseRetriever(base_path, pool, index.encoder).search([q.question for q in test_qs], 10)
    for q, r in zip(test_qs, got):
        want = dense_traces[q.key].rankings["dense"][0].ids[:10]
        if set(r.ids) != set(want):  # as a set: equal scores may swap places
            raise AssertionError(f"pool check: base dense top-10 of {q.key} differs from the full index's")

    tuned_path = work / "tuned.faiss"
    encoder = load_encoder(EmbedderConfig(name=str(model_dir)))
    if not tuned_path.exists():
        t0 = time.perf_counter()
        vecs = encoder.encode([index.text(pid) for pid in pool], is_query=False, batch_size=32)
        print(f"pool: {len(pool)} passages encoded in {time.perf_counter() - t0:.0f} s", flush=True)
        build_faiss(vecs, tuned_path)
    dense = DenseRetriever(tuned_path, pool, encoder)
    tag = f"{model_dir.name}-pool{depth}"
    d_tr, d_spq = _retrieve(args.index, _config(args.config, DENSE_RAW), test_qs,
                            work / f"dense-raw-tuned.{tag}.traces.jsonl", args.batch_size, dense=dense)
    h_tr, h_spq = _retrieve(args.index, _config(args.config, HYBRID_RERANK), test_qs,
                            work / f"hybrid-rerank-tuned.{tag}.traces.jsonl", args.batch_size, dense=dense)
    return d_tr, d_spq, h_tr, h_spq, len(pool)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="index built with the base encoder")
    ap.add_argument("--questions", required=True)
    ap.add_argument("--config", default=None, help="base preqrag.toml (rows override it)")
    ap.add_argument("--corpus", default=None, help="the index's corpus (re-indexed per fold with --encoder)")
    ap.add_argument("--encoder", action="store_true", help="also the fine-tuned encoder rows (re-indexes per fold)")
    ap.add_argument("--sample", type=int, default=None, help="fixed-seed sample size (seed 0, as bench/ablation.py)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--num-trees", type=int, default=RankerParams.num_trees)
    ap.add_argument("--min-data-in-leaf", type=int, default=RankerParams.min_data_in_leaf)
    ap.add_argument("--encoder-epochs", type=int, default=1)
    ap.add_argument("--encoder-max-steps", type=int, default=0)
    ap.add_argument("--encoder-batch-size", type=int, default=32)
    ap.add_argument("--encoder-eval", choices=["pool", "reindex"], default="pool",
                    help="pool: the tuned encoder searches a pool of each fold's first-stage candidates "
                         "(re-encoded; minutes); reindex: the whole corpus is re-indexed per fold (hours on CPU)")
    ap.add_argument("--pool-depth", type=int, default=30,
                    help="pool: the top-D BM25 and top-D base-dense passages of every test question")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workdir", default="bench_work/learned")
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default="docs/bench/learned.json")
    args = ap.parse_args(argv)

    questions, _ = read_questions(args.questions)
    if args.sample and args.sample < len(questions):
        questions = random.Random(0).sample(questions, args.sample)
    qs = [q for q in questions if gold_docs(q)]
    label = args.label or f"{Path(args.index).name} / {Path(args.questions).name} ({len(qs)} q, {args.folds}-fold CV)"
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    folds = folds_of(qs, args.folds, args.seed)
    params = RankerParams(num_trees=args.num_trees, min_data_in_leaf=args.min_data_in_leaf, seed=args.seed)
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {}
    data = {"rows": data} if isinstance(data, list) else data  # a bare list of rows before the note
    rows = data.get("rows", [])
    command = "python " + " ".join(sys.argv)

    def emit(name, traces_by_q, spq, **extra):
        nonlocal rows
        tr = [traces_by_q[q.key].model_copy(update={"learned_models": []}) for q in qs]  # checked per fold
        row = {"name": name, "label": label, "n_questions": len(qs), **final_retrieval_columns(tr, qs),
               "seconds_per_question": spq, "cross_validated": True, "folds": args.folds, **extra,
               "command": command, "machine": machine(),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        print(json.dumps(row), flush=True)
        rows = [r for r in rows if not (r["name"] == name and r.get("label") == label)] + [row]
        atomic_write_text(out, json.dumps({**data, "note": NOTE, "rows": rows}, indent=1))

    def learned_rows(base_traces, base_spq, tag, name):
        learned, seconds, peak, ms, ms_predict = {}, [], 0.0, [], []
        for k, (train, test) in enumerate(folds):
            path = work / f"{tag}_fold{k}.ranker.json"
            train_qs, test_qs = [qs[i] for i in train], [qs[i] for i in test]
            (sha, secs), rss = _train_in_child(_fit_child, (train_qs, base_traces, params, str(path)))
            seconds.append(secs)
            peak = max(peak, rss)
            got, m, mp_ = apply_ranker(path, test_qs, base_traces)
            check_traces(list(got.values()), test_qs)  # the fold's model never saw its test questions
            learned.update(got)
            ms.append(m)
            ms_predict.append(mp_)
        emit(name, learned, round(base_spq + sum(ms) / len(ms) / 1000, 4), trained=True,
             training_seconds_per_fold=round(sum(seconds) / len(seconds), 2), training_peak_rss_mb=peak,
             ranker_ms_per_question=round(sum(ms) / len(ms), 3),
             ranker_predict_ms_per_question=round(sum(ms_predict) / len(ms_predict), 3))

    base_cfg = _config(args.config, HYBRID_RERANK)
    base_traces, base_spq = _retrieve(args.index, base_cfg, qs, work / "hybrid-rerank.traces.jsonl", args.batch_size)
    emit("hybrid-rerank", base_traces, base_spq, trained=False)
    learned_rows(base_traces, base_spq, "base", "learned-ranker")

    if args.encoder:
        if args.encoder_eval == "reindex" and not args.corpus:
            ap.error("--encoder-eval reindex needs --corpus (the corpus is re-indexed with each fold's encoder)")
        from preqrag.index.embedded import build_index
        from preqrag.learned.encoder import EncoderParams, train_encoder

        dense_traces, dense_spq = _retrieve(args.index, _config(args.config, DENSE_RAW), qs,
                                            work / "dense-raw.traces.jsonl", args.batch_size)
        emit("dense-raw", dense_traces, dense_spq, trained=False)
        eparams = EncoderParams(epochs=args.encoder_epochs, batch_size=args.encoder_batch_size,
                                max_steps=args.encoder_max_steps, seed=args.seed)
        tuned = {"dense-raw-tuned": {}, "hybrid-rerank-tuned": {}, "both": {}}
        spq = {k: [] for k in tuned}
        enc_seconds, enc_peak, both_ms, pool_sizes = [], 0.0, [], []
        for k, (train, test) in enumerate(folds):
            train_qs, test_qs = [qs[i] for i in train], [qs[i] for i in test]
            model_dir = work / f"encoder_fold{k}"
            if not (model_dir / "preqrag_training.json").exists():
                pipeline = Pipeline.from_config(args.index, base_cfg)  # in this process (torch does not fork well):
                train_encoder(pipeline, train_qs, model_dir, eparams,  # its peak RSS is this process's so far
                              traces={q.key: base_traces[q.key] for q in train_qs})
                enc_peak = max(enc_peak, round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
            record = json.loads((model_dir / "preqrag_training.json").read_text())
            enc_seconds.append(record["seconds"])
            if args.encoder_eval == "pool":
                d_tr, d_spq, h_tr, h_spq, n_pool = _pool_rows(
                    args, base_traces, dense_traces, test_qs, model_dir, work / f"pool_fold{k}")
                pool_sizes.append(n_pool)
                path = work / f"base_fold{k}.ranker.json"  # the ranker trained on base traces (stated)
            else:
                index_k = work / f"index_fold{k}"
                cfg_k = _config(args.config, HYBRID_RERANK, embedder=str(model_dir))
                if not (index_k / "manifest.json").exists():
                    build_index(args.corpus, index_k, cfg_k)
                d_tr, d_spq = _retrieve(index_k, _config(args.config, DENSE_RAW, embedder=str(model_dir)), test_qs,
                                        work / f"dense-raw-tuned_fold{k}.traces.jsonl", args.batch_size)
                h_tr, h_spq = _retrieve(index_k, cfg_k, qs, work / f"hybrid-rerank-tuned_fold{k}.traces.jsonl",
                                        args.batch_size)
                path = work / f"tuned_fold{k}.ranker.json"
                _train_in_child(_fit_child, (train_qs, h_tr, params, str(path)))
            for t in (d_tr, h_tr):
                check_traces(list(t[q.key] for q in test_qs), test_qs)
            tuned["dense-raw-tuned"].update({q.key: d_tr[q.key] for q in test_qs})
            tuned["hybrid-rerank-tuned"].update({q.key: h_tr[q.key] for q in test_qs})
            spq["dense-raw-tuned"].append(d_spq)
            spq["hybrid-rerank-tuned"].append(h_spq)
            got, m, _ = apply_ranker(path, test_qs, h_tr)
            check_traces(list(got.values()), test_qs)
            tuned["both"].update(got)
            both_ms.append(m)
            spq["both"].append(h_spq + m / 1000)
        for name, traces in tuned.items():
            emit(name, traces, round(sum(spq[name]) / len(spq[name]), 4), trained=True,
                 encoder_training_seconds_per_fold=round(sum(enc_seconds) / len(enc_seconds), 1),
                 encoder_training_peak_rss_mb=enc_peak or None,
                 encoder_eval=args.encoder_eval,
                 **({"pool_depth": args.pool_depth, "pool_passages_per_fold": pool_sizes}
                    if args.encoder_eval == "pool" else {}),
                 **({"ranker_ms_per_question": round(sum(both_ms) / len(both_ms), 3)} if name == "both" else {}))
    return 0


run = main
"""The entry of ``python -m bench learned`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
