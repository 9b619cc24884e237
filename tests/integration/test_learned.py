"""Issue 14: the learned final ranking (train-ranker, [merge] name = "learned"), the fine-tuned
encoder (train-encoder), and evaluation refusing trained-on questions. Real smoke data: a BM25-only
index of the whole smoke corpus (no embedding: fast to build) for the ranker, the session's small
hybrid index for the encoder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from _bench import SMOKE, SMOKE_CORPUS, bench_file
from typer.testing import CliRunner

from preqrag.core.config import ConfigError, load_config
from preqrag.core.io import read_questions
from preqrag.learned.guard import TrainedOnError, check_models, check_traces
from preqrag.learned.ranker import LearnedRanker, RankerFileError, RankerParams
from preqrag.learned.train import (baseline_doc_rankings, collect_traces, doc_metrics, fit, folds_of,
                                   learned_doc_rankings, question_groups, training_config)
from preqrag.run.pipeline import Pipeline

SPARSE = {"pipeline": "hybrid", "retrieval": {"use_dense": False}, "cross_encoder": {"name": "none"},
          "run": {"batch_size": 30}}
"""BM25 only, no cross-encoder: a baseline the smoke set does not saturate (hit@1 < 1)."""

TINY = RankerParams(num_trees=30, min_data_in_leaf=1, num_threads=1)


@pytest.fixture(scope="module")
def sparse_index(tmp_path_factory):
    """BM25-only index of the smoke questions' gold documents plus the first 60 other smoke documents."""
    import gzip

    from preqrag.index.embedded import build_index

    gold = {d for line in open(bench_file(SMOKE), encoding="utf-8") for d in json.loads(line)["gold_doc_ids"]}
    docs, others = [], 0
    with gzip.open(bench_file(SMOKE_CORPUS), "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["id"] in gold or others < 60:
                others += d["id"] not in gold
                docs.append(line)
    d = tmp_path_factory.mktemp("sparse")
    (d / "corpus.jsonl").write_text("".join(docs), encoding="utf-8")
    build_index(d / "corpus.jsonl", d / "index", load_config(None, SPARSE), dense=False)
    return d / "index"


@pytest.fixture(scope="module")
def smoke_questions(smoke):
    return smoke  # conftest's, read once per session


@pytest.fixture(scope="module")
def trained(sparse_index, smoke_questions, tmp_path_factory):
    """A ranker trained with the CLI on every smoke question, its traces and its file."""
    out = tmp_path_factory.mktemp("ranker") / "ranker.json"
    cfg_path = out.with_name("sparse.toml")
    cfg_path.write_text('pipeline = "hybrid"\n[retrieval]\nuse_dense = false\n[cross_encoder]\nname = "none"\n')
    from preqrag.cli.app import app

    res = CliRunner().invoke(app, ["train-ranker", str(SMOKE), "--index", str(sparse_index), "-o", str(out),
                                   "--config", str(cfg_path), "--num-trees", "30", "--min-data-in-leaf", "1",
                                   "--threads", "1", "--folds", "2"])
    assert res.exit_code == 0, res.output
    pipeline = Pipeline.from_config(sparse_index, training_config(load_config(cfg_path)))
    traces = collect_traces(pipeline, smoke_questions, out.with_name("ranker.traces.jsonl"))  # from the cache
    return out, cfg_path, traces


def test_ranker_file_is_plain_json_and_improves_its_training_ranking(trained, smoke_questions):
    path, _, traces = trained
    text = path.read_text()
    obj = json.loads(text)  # plain JSON: no pickle anywhere
    assert obj["format"] == "preqrag-learned-ranker" and "tree" in obj["lightgbm"]
    assert set(obj["trained_on"]["ids"]) == {q.key for q in smoke_questions}
    assert json.loads(path.with_name("ranker.cv.json").read_text())["folds"] == 2
    ranker = LearnedRanker.load(path)
    assert ranker.booster.num_trees() == 30
    base = doc_metrics(baseline_doc_rankings(smoke_questions, traces), smoke_questions)
    learned = doc_metrics(learned_doc_rankings(ranker, smoke_questions, traces), smoke_questions)
    assert base["single_hit@1"] < 1.0  # room to improve
    assert learned["single_mrr@10"] > base["single_mrr@10"]
    assert learned["single_hit@1"] > base["single_hit@1"]
    # same data, same seed: the same model; another seed's model is another model
    again = fit(smoke_questions, traces, TINY)
    assert again.booster.model_to_string() == fit(smoke_questions, traces, TINY).booster.model_to_string()


def test_learned_merge_in_a_real_pipeline_run(trained, sparse_index, smoke_questions):
    path, cfg_path, traces = trained
    cfg = load_config(cfg_path, {"merge": {"name": "learned", "model": str(path)}, "run": {"trace_depth": 100}})
    pipeline = Pipeline.from_config(sparse_index, cfg)
    qs = smoke_questions[:6]
    got = pipeline.retrieve(qs)
    ranker = LearnedRanker.load(path)
    expected = learned_doc_rankings(ranker, qs, traces)
    for q, t in zip(qs, got):
        docs = t.rankings["final_documents"][0]
        assert docs.ids == expected[q.key][:len(docs.ids)]
        assert docs.scores == sorted(docs.scores, reverse=True)
        # passages grouped by document, in document order
        final_docs = list(dict.fromkeys(pid.rsplit("#", 1)[0] for pid in t.rankings["final"][0].ids))
        assert final_docs == docs.ids[:len(final_docs)]
        assert t.context_ids == t.rankings["final"][0].ids[:cfg.generator.context_top_k]
        assert t.learned_models[0]["kind"] == "ranker" and t.learned_models[0]["sha256"] == ranker.sha256
        assert "merge" in t.seconds
    # the default merge is unchanged: no learned key in the trace or its JSON
    plain = Pipeline.from_config(sparse_index, load_config(cfg_path, {"run": {"trace_depth": 100}})).retrieve(qs[:2])
    assert "learned_models" not in plain[0].model_dump(mode="json") and "final_documents" not in plain[0].rankings
    assert "merge" in plain[0].seconds  # every merge slot is timed, the default's too
    assert plain[0].rankings["final"] == traces[qs[0].key].rankings["final"]


def test_evaluation_refuses_trained_on_questions(trained, sparse_index, smoke_questions, tmp_path):
    path, cfg_path, _ = trained
    cfg = load_config(cfg_path, {"merge": {"name": "learned", "model": str(path)}})
    got = Pipeline.from_config(sparse_index, cfg).retrieve(smoke_questions[:3])
    with pytest.raises(TrainedOnError, match="used to train the ranker"):
        check_traces(got, smoke_questions)
    run = tmp_path / "run" / "answers.jsonl"
    run.parent.mkdir()
    run.write_text("".join(json.dumps({"id": t.id, "question": q.question, "passages": [], "final_prompt": "",
                                       "answer": "x"}) + "\n" for q, t in zip(smoke_questions, got)))
    run.with_name("answers.traces.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in got))
    from preqrag.cli.app import app

    res = CliRunner().invoke(app, ["eval", str(run), "--questions", str(SMOKE), "-o", str(tmp_path / "rep")])
    assert res.exit_code == 2 and "used to train the ranker" in res.output and "--allow-trained-on" in res.output
    # held-out questions pass: a model trained on the first 40 questions, checked against the other 20
    _, _, traces = trained
    held = tmp_path / "held.json"
    sha = fit(smoke_questions[:40], traces, TINY).save(held)
    model = {"kind": "ranker", "path": str(held), "sha256": sha}
    check_models([model], smoke_questions[40:])
    with pytest.raises(TrainedOnError):
        check_models([model], smoke_questions[39:])


def test_bad_model_file_gives_a_clear_config_error(trained, tmp_path):
    path, cfg_path, _ = trained
    with pytest.raises(ConfigError, match="merge.model"):
        load_config(cfg_path, {"merge": {"name": "learned", "model": str(tmp_path / "missing.json")}})
    with pytest.raises(ConfigError, match="merge.model: required"):
        load_config(cfg_path, {"merge": {"name": "learned"}})
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\x80\x04\x95 pickle")
    with pytest.raises(RankerFileError, match="bad.json"):
        LearnedRanker.load(bad)
    edited = json.loads(path.read_text())
    edited["lightgbm"] = edited["lightgbm"].replace("tree", "trie", 1)
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(edited))
    with pytest.raises(RankerFileError, match="hash mismatch"):
        LearnedRanker.load(tampered)
    from preqrag.components.registry import Context, build

    cfg = load_config(cfg_path, {"merge": {"name": "learned", "model": str(bad)}})
    with pytest.raises(ConfigError, match="merge.model: .*bad.json"):
        build("merge", "learned", Context(cfg))


def test_cv_folds_never_share_a_gold_document(smoke_questions):
    from preqrag.learned.train import gold_docs

    groups = question_groups(smoke_questions)
    assert len(groups) == len(smoke_questions)
    for train, test in folds_of(smoke_questions, 2):
        train_docs = {d for i in train for d in gold_docs(smoke_questions[i])}
        assert not train_docs & {d for i in test for d in gold_docs(smoke_questions[i])}


@pytest.mark.slow
def test_train_encoder_changes_weights_and_pulls_positives_closer(small_index, small_corpus, tmp_path):
    from sentence_transformers import SentenceTransformer

    from preqrag.index.embedded import IndexOpenError, model_sha256
    from preqrag.learned.encoder import EncoderParams, mine_pairs, train_encoder
    from preqrag.models.files import resolve

    qs, _ = read_questions(small_corpus[1])
    cfg = training_config(load_config(None, {"pipeline": "hybrid", "cross_encoder": {"name": "none"}}))
    pipeline = Pipeline.from_config(small_index, cfg)
    out = tmp_path / "enc"
    params = EncoderParams(epochs=2, batch_size=3, hard_negatives=1, learning_rate=1e-4, max_seq_length=64,
                           checkpoint_every=2, seed=0, threads=2)
    record = train_encoder(pipeline, qs, out, params)
    assert record["steps"] == 6 and (out / "preqrag_training.json").exists()
    assert record["model_sha256"] == model_sha256(out)
    assert not (tmp_path / "enc.checkpoint").exists()
    base_dir = resolve(cfg.embedder.name).location
    base, tuned = SentenceTransformer(base_dir, device="cpu"), SentenceTransformer(str(out), device="cpu")
    for m in (base, tuned):
        m.max_seq_length = 64
    w0 = dict(base.named_parameters())
    changed = [n for n, w in tuned.named_parameters() if not np.allclose(w.detach().numpy(), w0[n].detach().numpy())]
    assert changed
    traces = collect_traces(pipeline, qs, tmp_path / "enc.traces.jsonl")
    pairs = mine_pairs(qs, traces, {}, 0)
    qtext = {q.key: q.question for q in qs}

    def similarity(m):
        a = m.encode([qtext[p["qid"]] for p in pairs], normalize_embeddings=True)
        b = m.encode([pipeline.index.text(p["positive"]) for p in pairs], normalize_embeddings=True)
        return float(np.mean(np.sum(a * b, axis=1)))

    assert similarity(tuned) > similarity(base)
    # an index built with the base encoder is refused with the trained one (by name), and a
    # re-trained model at the same path is refused by its recorded fingerprint
    with pytest.raises(IndexOpenError):
        Pipeline.from_config(small_index, load_config(None, {"pipeline": "hybrid", "embedder": {"name": str(out)}}))
    fake = tmp_path / "fake_index"
    shutil.copytree(small_index, fake)
    manifest = json.loads((fake / "manifest.json").read_text())
    manifest["embedder"]["model_sha256"] = "0" * 64
    (fake / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexOpenError, match="another version"):
        Pipeline.from_config(fake, load_config(None, {"pipeline": "hybrid"}))


@pytest.mark.slow
def test_train_encoder_resumes_from_its_checkpoint(small_index, small_corpus, tmp_path):
    """A run interrupted after a checkpoint resumes there and ends with the weights of an
    uninterrupted run (same seed, same data)."""
    from sentence_transformers import SentenceTransformer

    from preqrag.learned.encoder import EncoderParams, train_encoder

    qs, _ = read_questions(small_corpus[1])
    cfg = training_config(load_config(None, {"pipeline": "hybrid", "cross_encoder": {"name": "none"}}))
    pipeline = Pipeline.from_config(small_index, cfg)
    traces = collect_traces(pipeline, qs, tmp_path / "traces.jsonl")
    params = EncoderParams(epochs=1, batch_size=3, hard_negatives=1, learning_rate=1e-4, max_seq_length=32,
                           checkpoint_every=1, seed=0, threads=2)

    class Interrupt(Exception):
        pass

    def stop_at_2(phase, done, total):
        if phase == "training" and done == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        train_encoder(pipeline, qs, tmp_path / "a", params, progress=stop_at_2, traces=traces)
    assert (tmp_path / "a.checkpoint" / "state.json").exists()
    steps = []
    train_encoder(pipeline, qs, tmp_path / "a", params, traces=traces,
                  progress=lambda p, d, t: steps.append(d) if p == "training" else None)
    assert steps[0] == 2  # the checkpoint holds step 1 (the interruption came before step 2 was saved)
    train_encoder(pipeline, qs, tmp_path / "b", params, traces=traces)
    a = dict(SentenceTransformer(str(tmp_path / "a"), device="cpu").named_parameters())
    for name, w in SentenceTransformer(str(tmp_path / "b"), device="cpu").named_parameters():
        assert np.allclose(w.detach().numpy(), a[name].detach().numpy(), atol=1e-6), name
