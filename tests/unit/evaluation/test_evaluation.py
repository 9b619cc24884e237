"""Tests of preqrag.evaluation on real bench questions (smoke.jsonl) and hand-computed values; the LLM
judge with scripted replies (against a real llama.cpp server: tests/integration/test_judge_llm.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from preqrag.evaluation import load_run
from preqrag.evaluation.classification import evaluate_classification, read_predictions
from preqrag.evaluation.judge import (METRICS, judge_answers, judge_is_meaningless, load_judgments,
                                      parse_score, render_prompt, summarise_judgments)
from preqrag.evaluation.report import MEANINGLESS_JUDGE_NOTE, write_report
from preqrag.components.fusion import interleave_ids as interleave
from preqrag.evaluation.retrieval import (evaluate_retrieval, gold_docs,
                                          per_query_metrics, stage_doc_rankings)
from preqrag.core.records import Classification, QueryPlan, Ranking, SubQuery, Trace
from preqrag.core.contracts import LLMError

from _bench import SMOKE
from fakes import FakeLLMBase


# ---------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def multis(smoke):
    return [q for q in smoke if q.extra["n_gold"] == 2]


def pid(doc: str, pos: int = 0) -> str:
    return f"{doc}#{pos}"


def make_trace(q, qtype: str, rankings: dict[str, list[list[str]]], context: list[str] | None = None) -> Trace:
    n_sub = max((len(v) for v in rankings.values()), default=1)
    plan = QueryPlan(question_type=qtype, rewriter="test",
                     sub_queries=[SubQuery(text=q.question, sparse=q.question, dense=q.question)
                                  for _ in range(max(1, n_sub))])
    return Trace(id=q.id, classification=Classification(question_type=qtype, classifier="test"), plan=plan,
                 rankings={s: [Ranking(ids=ids, scores=[float(len(ids) - i) for i in range(len(ids))])
                               for ids in lists] for s, lists in rankings.items()},
                 context_ids=context or [])


def negatives(smoke, exclude: set[str], n: int) -> list[str]:
    """Real document ids (gold docs of other smoke questions) that are not in ``exclude``."""
    out = []
    for q in smoke:
        for d in gold_docs(q):
            if d not in exclude and d not in out:
                out.append(d)
    return out[:n]


def all_block(res, stage, subset):
    return res["metrics"][stage]["breakdown"]["all"]["all"][subset]


@pytest.fixture(scope="module")
def hand_run(smoke, singles, multis):
    """Four single-gold questions (gold at doc rank 1, 3, 3 via duplicate passages, absent),
    two multi-gold questions, one failed single-gold question."""
    s1, s2, s3, s4, s5 = singles[:5]
    m1, m2 = multis[:2]
    used = {d for q in (s1, s2, s3, s4, s5, m1, m2) for d in gold_docs(q)}
    n1, n2, n3 = negatives(smoke, used, 3)
    g = lambda q, i=0: gold_docs(q)[i]  # noqa: E731
    traces = [
        make_trace(s1, "single", {"final": [[pid(g(s1)), pid(n1), pid(n2)]],
                                  "sparse": [[pid(n1), pid(g(s1))]]}, [pid(g(s1)), pid(n1), pid(n2)]),
        make_trace(s2, "single", {"final": [[pid(n1), pid(n2), pid(g(s2), 3)]],
                                  "sparse": [[pid(g(s2))]]}, [pid(n1), pid(n2), pid(g(s2), 3)]),
        # passages n1#0, n1#1 are one document: gold is document rank 3, passage rank 4
        make_trace(s3, "multi", {"final": [[pid(n1), pid(n1, 1), pid(n2), pid(g(s3))]],
                                 "sparse": [[pid(n3)]]}, [pid(n1), pid(n1, 1), pid(n2)]),
        make_trace(s4, "single", {"final": [[pid(n1), pid(n2)]], "sparse": [[]]}, [pid(n1), pid(n2)]),
        make_trace(m1, "multi", {"final": [[pid(g(m1, 0)), pid(n1), pid(g(m1, 1), 2)]],
                                 # two sub-queries: docs [n1, g0] and [g1, n1] -> interleaved n1, g1, g0
                                 "sparse": [[pid(n1), pid(g(m1, 0))], [pid(g(m1, 1)), pid(n1, 1)]]},
                   [pid(g(m1, 0)), pid(n1), pid(g(m1, 1), 2)]),
        make_trace(m2, "single", {"final": [[pid(n1), pid(g(m2, 1))]], "sparse": [[pid(n2)], [pid(n3)]]},
                   [pid(n1), pid(g(m2, 1))]),
    ]
    # a stage present for only some questions
    traces[0].rankings["dense"] = [Ranking(ids=[pid(g(s1))], scores=[1.0])]
    return {"traces": traces, "failed": [str(s5.id)], "qs": (s1, s2, s3, s4, s5, m1, m2)}


# ---------------------------------------------------------------------------- retrieval

def test_interleave_and_doc_mapping():
    assert interleave([["a", "b"], ["c", "a", "d"]]) == ["a", "c", "b", "d"]
    assert interleave([]) == []
    t = Trace(id="x", classification=Classification(question_type="multi", classifier="t"),
              plan=QueryPlan(question_type="multi", rewriter="t",
                             sub_queries=[SubQuery(text="q", sparse="q", dense="q")]),
              rankings={"sparse": [Ranking(ids=["<urn:uuid:a>#0", "<urn:uuid:a>#3", "<urn:uuid:b>#1"],
                                           scores=[3, 2, 1]),
                                   Ranking(ids=["<urn:uuid:c>#0", "<urn:uuid:b>#0"], scores=[2, 1])]},
              context_ids=["<urn:uuid:b>#1", "<urn:uuid:b>#2", "<urn:uuid:a>#0"])
    d = stage_doc_rankings(t.model_dump())
    assert d["sparse"] == ["<urn:uuid:a>", "<urn:uuid:c>", "<urn:uuid:b>"]
    assert d["context"] == ["<urn:uuid:b>", "<urn:uuid:a>"]


def test_hand_computed_metrics(smoke, hand_run):
    res = evaluate_retrieval(hand_run["traces"], smoke, failed_ids=hand_run["failed"])
    assert res["n"]["evaluated"] == 7 and res["n"]["failed"] == 1
    assert res["n"]["single"] == 5 and res["n"]["multi"] == 2
    assert res["stages"] == ["sparse", "dense", "final", "context"]

    # final, single-gold: ranks 1, 3, 3, miss, failed(miss)
    s = all_block(res, "final", "single")
    assert s["n"] == 5
    assert s["hit@1"] == pytest.approx(1 / 5)
    assert s["hit@2"] == pytest.approx(1 / 5)
    assert s["hit@3"] == pytest.approx(3 / 5)
    assert s["hit@5"] == pytest.approx(3 / 5)
    assert s["hit@10"] == pytest.approx(3 / 5)
    assert s["mrr@10"] == pytest.approx((1 + 1 / 3 + 1 / 3) / 5)

    # final, multi-gold: m1 gold at 1 and 3; m2 one gold at 2
    m = all_block(res, "final", "multi")
    assert m["n"] == 2
    assert m["recall@1"] == pytest.approx((0.5 + 0) / 2)
    assert m["recall@2"] == pytest.approx((0.5 + 0.5) / 2)
    assert m["recall@3"] == pytest.approx((1 + 0.5) / 2)
    assert m["recall@10"] == pytest.approx(0.75)
    assert (m["all@1"], m["all@2"], m["all@3"], m["all@10"]) == (0.0, 0.0, 0.5, 0.5)

    # sparse: s1 rank 2, s2 rank 1, s3 miss, s4 empty, s5 failed; m1 interleaved [n1, g1, g0]
    s = all_block(res, "sparse", "single")
    assert (s["hit@1"], s["hit@2"]) == (pytest.approx(1 / 5), pytest.approx(2 / 5))
    assert s["mrr@10"] == pytest.approx((0.5 + 1) / 5)
    m = all_block(res, "sparse", "multi")
    assert (m["recall@1"], m["recall@2"], m["recall@3"]) == (0.0, pytest.approx(0.25), pytest.approx(0.5))

    # context: top-3 passages; s3's gold is not in its context
    s = all_block(res, "context", "single")
    assert s["hit@3"] == pytest.approx(2 / 5)

    # dense exists only in s1's trace: the 5 other traces lack it (scored 0, not dropped);
    # the failed question is counted as failed, not as missing
    assert res["metrics"]["dense"]["n_missing"] == 5
    assert all_block(res, "dense", "single")["hit@1"] == pytest.approx(1 / 5)

    # breakdowns: by gold type and by predicted type (failed question -> "failed")
    bd = res["metrics"]["final"]["breakdown"]
    assert bd["gold_type"]["single"]["single"]["n"] == 5 and bd["gold_type"]["single"]["multi"]["n"] == 0
    assert bd["gold_type"]["single"]["multi"]["recall@1"] is None
    assert set(bd["pred_type"]) == {"single", "multi", "failed"}
    assert bd["pred_type"]["multi"]["single"]["n"] == 1  # s3 predicted multi
    assert bd["pred_type"]["multi"]["single"]["hit@3"] == 1.0
    assert bd["pred_type"]["failed"]["single"]["hit@10"] == 0.0
    for cat in ("answer_type", "factuality", "premise", "phrasing", "linguistic_variation", "user_expertise"):
        assert sum(v["single"]["n"] + v["multi"]["n"] for v in bd[cat].values()) == 7


def _reference(ranking: list[str], gold: set[str], k: int) -> tuple[float, float]:
    top = ranking[:k]
    hits = sum(1 for d in top if d in gold)
    return float(hits > 0), hits / len(gold)


def _reference_mrr(ranking: list[str], gold: set[str], k: int = 10) -> float:
    for i, d in enumerate(ranking[:k]):
        if d in gold:
            return 1.0 / (i + 1)
    return 0.0


def test_ranx_matches_reference_implementation(smoke):
    rng = random.Random(7)
    pool = sorted({d for q in smoke for d in gold_docs(q)})
    gold = {q.key: gold_docs(q) for q in smoke}
    rankings = {}
    for q in smoke:
        docs = rng.sample(pool, 15)
        if rng.random() < 0.6:  # put some gold docs at random ranks
            for gdoc in gold[q.key]:
                if gdoc not in docs and rng.random() < 0.7:
                    docs.insert(rng.randrange(0, 12), gdoc)
        rankings[q.key] = docs
    rankings[smoke[0].key] = []  # an empty ranking scores 0
    pq = per_query_metrics(rankings, gold)
    assert set(pq) == set(gold)
    for qid, row in pq.items():
        g = set(gold[qid])
        for k in (1, 2, 3, 5, 10):
            hit, rec = _reference(rankings[qid], g, k)
            assert row[f"hit@{k}"] == pytest.approx(hit), (qid, k)
            assert row[f"recall@{k}"] == pytest.approx(rec), (qid, k)
            assert row[f"all@{k}"] == (1.0 if rec == 1.0 else 0.0)
        assert row["mrr@10"] == pytest.approx(_reference_mrr(rankings[qid], g))


def test_trec_files_rescore(tmp_path, smoke, hand_run):
    from ranx import Qrels, Run, evaluate

    res = evaluate_retrieval(hand_run["traces"], smoke, failed_ids=hand_run["failed"],
                             trec_dir=tmp_path, run_name="hand")
    qrels = Qrels.from_file(str(tmp_path / "qrels.trec"), kind="trec")
    run = Run.from_file(str(tmp_path / "final.trec"), kind="trec")
    assert len(qrels) == 7 and len(run) == 6  # the failed question has no ranking
    assert run.name == "hand"
    # trec_eval-style re-scoring over the 7 questions (missing run entries score 0)
    scores = evaluate(qrels, run, "mrr@10", make_comparable=True)
    s = all_block(res, "final", "single")
    m = all_block(res, "final", "multi")
    assert scores == pytest.approx((s["mrr@10"] * 5 + (1 + 0.5) * 1) / 7)
    assert m["n"] == 2


# ---------------------------------------------------------------------------- classification

def test_classification_metrics(smoke, singles, multis, tmp_path):
    pred = {}
    for q, p in zip(singles[:4], ["single", "single", "single", "multi"]):
        pred[q.key] = p
    for q, p in zip(multis[:4], ["multi", "multi", "single", "single"]):
        pred[q.key] = p
    res = evaluate_classification(pred, smoke)
    assert res["n"] == 8 and res["n_missing"] == 52
    assert res["accuracy_single"] == pytest.approx(0.75)
    assert res["accuracy_multi"] == pytest.approx(0.5)
    assert res["accuracy"] == pytest.approx(5 / 8)
    assert res["balanced_accuracy"] == pytest.approx(0.625)
    assert res["confusion"] == {"single": {"single": 3, "multi": 1}, "multi": {"single": 2, "multi": 2}}
    at = res["by_answer_type"]
    assert sum(v["n"] for v in at.values()) == 8
    assert sum(v["correct"] for v in at.values()) == 5
    for q in singles[:4] + multis[:4]:
        assert (q.extra["answer_type"] or "none") in at

    # the same predictions as a `preqrag classify` output file
    f = tmp_path / "classify.jsonl"
    f.write_text("".join(json.dumps({"id": k, "question_type": v}) + "\n" for k, v in pred.items()))
    assert read_predictions(f) == pred
    run = load_run(f)
    assert run.kind == "classify" and run.predictions == pred


# ---------------------------------------------------------------------------- judge

def test_parse_score_is_strict():
    eq, faith, corr = METRICS["equivalence"], METRICS["faithfulness"], METRICS["liverag_correctness"]
    assert parse_score("Equivalence: 2", eq) == ("ok", 2, None)
    assert parse_score("  equivalence:1  \n", eq) == ("ok", 1, None)
    assert parse_score("The answer matches.\nEquivalence: 0\n", eq) == ("ok", 0, None)
    assert parse_score("Faithfulness: -1", faith) == ("ok", -1, None)
    assert parse_score("Correctness: -1", corr) == ("ok", -1, None)
    assert parse_score("Equivalence: 3", eq)[:2] == ("unparsable", None)
    assert "out of range" in parse_score("Equivalence: 3", eq)[2]
    assert parse_score("Faithfulness: 2", faith)[0] == "unparsable"
    assert parse_score("Equivalence: 2.", eq)[0] == "unparsable"
    assert parse_score("Equivalence: 1/2", eq)[0] == "unparsable"
    assert parse_score("I think it is fully equivalent (2).", eq) == ("unparsable", None, "no score line")
    assert parse_score("Equivalence: 2\nEquivalence: 1", eq)[2].startswith("conflicting")
    assert parse_score("Equivalence: 2\nEquivalence: 2", eq) == ("ok", 2, None)
    assert parse_score("Relevance: 2", eq)[0] == "unparsable"
    assert parse_score("", eq)[0] == "unparsable"


def test_prompts_are_the_papers():
    p = render_prompt(METRICS["equivalence"], question="Q?", answer="A {x} <answer>", reference="R")
    assert p.startswith("You are an assistant evaluating the equivalence of a generated answer compared "
                        "to the gold answer. Equivalence measures semantic similarity, not surface similarity.")
    assert "2: Fully equivalent — expresses the same meaning." in p
    assert "Question: Q?\nGold Answer: R\nGenerated Answer: A {x} <answer>\n" in p  # no re-substitution
    assert p.endswith("Return ONLY your evaluation like this:\nEquivalence: <score>")
    f = render_prompt(METRICS["faithfulness"], question="Q", answer="A", passages=["p1", "p2"])
    assert "-1: No support. All answer parts are unsupported by the context." in f
    assert "Context: p1\n\np2\nQuestion: Q" in f
    long = " ".join(f"w{i}" for i in range(400))
    lr = render_prompt(METRICS["liverag_correctness"], question="Q", answer=long, reference="R")
    assert "w299" in lr and "w300" not in lr
    assert "w399" in render_prompt(METRICS["relevance"], question="Q", answer=long)
    assert judge_is_meaningless("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert not judge_is_meaningless("gpt-4o-mini")


class ScriptedLLM(FakeLLMBase):
    """Test double for the *parsing logic only*: answers each prompt with a scripted reply."""

    def __init__(self, reply, name="scripted"):
        self.reply = reply
        self.name = name
        self.asked: list[str] = []

    def chat(self, messages, *, max_tokens, temperature=0.0, **options):
        raise NotImplementedError

    def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
        out = []
        for m in requests:
            prompt = m[-1]["content"]
            self.asked.append(prompt)
            out.append(self.reply(prompt))
        return out


def _answers(qs, n):
    return [{"id": q.id, "question": q.question, "answer": q.extra["answer"],
             "passages": [{"passage": f"passage about {q.key}", "doc_IDs": gold_docs(q)[:1]}],
             "final_prompt": "p"} for q in qs[:n]]


def test_judge_records_and_never_guesses(tmp_path, smoke):
    answers = _answers(smoke, 3)
    first = str(answers[0]["id"])

    def reply(prompt):
        if "Equivalence: <score>" in prompt:
            return "Equivalence: 2" if answers[0]["answer"] in prompt else "Equivalence: 5"
        if "Relevance: <score>" in prompt:
            return "fully relevant"
        if "Correctness: <score>" in prompt:
            return LLMError("server down")
        return "Faithfulness: -1"

    llm = ScriptedLLM(reply)
    path = tmp_path / "j.jsonl"
    recs = judge_answers(answers, smoke, llm, path, batch_size=4)
    assert len(recs) == 3 * 5 and len(llm.asked) == 15
    by = {(r["id"], r["metric"]): r for r in recs}
    assert (by[(first, "equivalence")]["status"], by[(first, "equivalence")]["score"]) == ("ok", 2)
    other = str(answers[1]["id"])
    assert by[(other, "equivalence")]["status"] == "unparsable"
    assert by[(other, "equivalence")]["score"] is None
    assert by[(other, "equivalence")]["raw"] == "Equivalence: 5"
    assert by[(other, "relevance")]["status"] == "unparsable"
    assert by[(other, "relevance")]["raw"] == "fully relevant"
    assert by[(other, "liverag_correctness")]["status"] == "error"
    assert by[(other, "faithfulness")]["score"] == -1
    assert len(load_judgments(path)) == 15  # every judgment was appended

    summ = summarise_judgments(recs, smoke)
    eq = summ["equivalence"]["all"]
    assert (eq["n_judged"], eq["n_valid"], eq["n_unparsable"]) == (3, 1, 2)
    assert eq["normalised"] == pytest.approx(2 / (1 * 2))
    assert summ["relevance"]["all"]["normalised"] is None
    assert summ["faithfulness"]["all"]["normalised"] == pytest.approx(-3 / 3)
    assert summ["liverag_correctness"]["all"]["n_error"] == 3

    # resume: only the failed calls (errors) are asked again
    llm2 = ScriptedLLM(lambda p: "Correctness: 1")
    recs2 = judge_answers(answers, smoke, llm2, path)
    assert len(llm2.asked) == 3 and all("Correctness: <score>" in p for p in llm2.asked)
    assert sum(1 for r in recs2 if r["metric"] == "liverag_correctness" and r["score"] == 1) == 3


def test_judge_resume_asks_only_missing_pairs(tmp_path, smoke):
    answers = _answers(smoke, 4)
    path = tmp_path / "j.jsonl"
    done = [{"id": str(a["id"]), "metric": "relevance", "judge": "scripted", "status": "ok", "score": 1,
             "reason": None, "raw": "Relevance: 1"} for a in answers[:3]]
    done.append({"id": str(answers[3]["id"]), "metric": "equivalence", "judge": "scripted",
                 "status": "unparsable", "score": None, "reason": "no score line", "raw": "?"})
    done.append({"id": str(answers[3]["id"]), "metric": "relevance", "judge": "another-judge",
                 "status": "ok", "score": 2, "reason": None, "raw": "Relevance: 2"})
    path.write_text("".join(json.dumps(r) + "\n" for r in done) + '{"id": "torn', encoding="utf-8")
    llm = ScriptedLLM(lambda p: "Relevance: 2" if "Relevance: <score>" in p else "Equivalence: 1")
    recs = judge_answers(answers, smoke, llm, path, metrics=["relevance", "equivalence"])
    # missing: equivalence of answers 0..2, relevance of answer 3 (other judge's doesn't count)
    assert len(llm.asked) == 4
    assert sum("Relevance: <score>" in p for p in llm.asked) == 1
    assert len(recs) == 8
    assert [r["score"] for r in recs if r["metric"] == "relevance"] == [1, 1, 1, 2]
    assert len(load_judgments(path)) == len(done) + 4  # torn line dropped, 4 appended
    # limit: judge only the first answer -> nothing new to ask
    llm3 = ScriptedLLM(lambda p: "Relevance: 0")
    assert len(judge_answers(answers, smoke, llm3, path, metrics=["relevance"], limit=1)) == 1
    assert llm3.asked == []


# ---------------------------------------------------------------------------- run files + report

def _write_run(dirpath: Path, traces: list[Trace], questions, failed=()):
    dirpath.mkdir(parents=True, exist_ok=True)
    qmap = {q.key: q for q in questions}
    with open(dirpath / "answers.jsonl", "w") as fa, open(dirpath / "answers.traces.jsonl", "w") as ft:
        for t in traces:
            q = qmap[str(t.id)]
            fa.write(json.dumps({"id": t.id, "question": q.question,
                                 "passages": [{"passage": f"text of {p}", "doc_IDs": [p.rsplit('#', 1)[0]]}
                                              for p in t.context_ids],
                                 "final_prompt": "prompt", "answer": q.extra["answer"]}) + "\n")
            ft.write(json.dumps(t.model_dump()) + "\n")
    with open(dirpath / "answers.failed.jsonl", "w") as ff:
        for qid in failed:
            ff.write(json.dumps({"id": qid, "question": qmap[qid].question, "error": "boom",
                                 "stage": "rerank"}) + "\n")
    return dirpath / "answers.jsonl"


def test_load_run_and_report_side_by_side(tmp_path, smoke, hand_run):
    from preqrag.cli.commands.evaluation import evaluate_run

    a = _write_run(tmp_path / "runA", hand_run["traces"], smoke, hand_run["failed"])
    # runB: everything perfect at the final stage
    perfect = []
    for t in hand_run["traces"]:
        q = next(q for q in smoke if q.key == str(t.id))
        ids = [pid(d) for d in gold_docs(q)]
        perfect.append(make_trace(q, t.classification.question_type, {"final": [ids]}, ids))
    b = _write_run(tmp_path / "runB", perfect, smoke)
    ra, rb = load_run(a), load_run(tmp_path / "runB")
    assert (ra.name, rb.name) == ("runA", "runB")
    assert len(ra.answers) == 6 and len(ra.traces) == 6 and ra.failed_ids == hand_run["failed"]
    assert b.exists() and rb.failures == []

    out = tmp_path / "report"
    judge = ScriptedLLM(lambda p: "Equivalence: 2", name="HuggingFaceTB/SmolLM2-135M-Instruct")
    results = [evaluate_run(ra, smoke, out, judge_llm=judge, judge_limit=2), evaluate_run(rb, smoke, out)]
    paths = write_report(results, out, questions_path=str(SMOKE))
    md = paths["markdown"].read_text()
    html = paths["html"].read_text()
    metrics = json.loads(paths["metrics"].read_text())

    assert set(metrics["runs"]) == {"runA", "runB"}
    fin = metrics["runs"]["runB"]["retrieval"]["metrics"]["final"]["breakdown"]["all"]["all"]
    assert fin["single"]["hit@1"] == 1.0 and fin["multi"]["all@2"] == 1.0
    assert metrics["runs"]["runA"]["judge"]["meaningless"] is True
    # classification is scored on the questions the run covers; the failed one has no prediction
    assert metrics["runs"]["runA"]["classification"]["n"] == 6
    assert metrics["runs"]["runA"]["classification"]["n_missing"] == 1
    assert metrics["runs"]["runA"]["judge"]["summary"]["relevance"]["all"]["n_unparsable"] == 2
    # side by side: one column per run, named by run
    assert "| metric | runA | runB |" in md
    assert "| stage | runA | runB |" in md
    assert "runA: hit@1" in md and "runB: mrr@10" in md
    a_mrr = metrics["runs"]["runA"]["retrieval"]["metrics"]["final"]["breakdown"]["all"]["all"]["single"]["mrr@10"]
    assert f"| mrr@10 (single-gold) | {a_mrr:.3f} | 1.000 |" in md
    assert "Single/multi classification" in md and "Confusion by answer_type" in md
    assert "By linguistic_variation" in md and "By user_expertise" in md
    assert MEANINGLESS_JUDGE_NOTE in md
    assert "NOT meaningful" in html
    assert "<th>runA</th><th>runB</th>" in html
    assert html.count("data:image/png;base64,") >= 3
    assert "plots/hitk_by_stage.png" in md and (out / "plots" / "hitk_by_stage.png").stat().st_size > 1000
    assert (out / "trec" / "runA" / "qrels.trec").exists()
    assert (out / "trec" / "runB" / "final.trec").exists()
    assert (out / "judgments" / "runA.jsonl").exists()


def test_cli_eval_command(tmp_path, smoke, hand_run):
    typer = pytest.importorskip("typer")
    from typer.testing import CliRunner

    from preqrag.cli.commands.evaluation import register

    app = typer.Typer()
    register(app)

    @app.command("noop")  # a second command keeps `eval` a sub-command
    def noop() -> None:
        pass

    _write_run(tmp_path / "r1", hand_run["traces"], smoke, hand_run["failed"])
    _write_run(tmp_path / "r2", hand_run["traces"][:3], smoke)
    out = tmp_path / "rep"
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "r1" / "answers.jsonl"), str(tmp_path / "r2"),
                                   "--questions", str(SMOKE), "-o", str(out), "--name", "base",
                                   "--name", "half"])
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text()
    assert "| metric | base | half |" in md
    m = json.loads((out / "metrics.json").read_text())
    assert m["runs"]["half"]["retrieval"]["n"]["evaluated"] == 3
    bad = CliRunner().invoke(app, ["eval", str(tmp_path / "r1"), "--questions", str(SMOKE), "-o", str(out),
                                   "--name", "a", "--name", "b"])
    assert bad.exit_code != 0
