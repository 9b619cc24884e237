"""GINGER preset (UiS-IAI@LiveRAG) with real models: pairwise reranking and nugget clustering on
real smoke passages with the bundled cross-encoder and embedder, the generator's citations,
rankings and fallbacks, the duoT5 loading path (a tiny local T5), and one end-to-end run of the
preset with the bundled models. Parsing and fallbacks with fake LLMs:
tests/unit/systems/test_ginger_steps.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import TEST_OVERRIDES
from preqrag.core.config import load_config
from preqrag.systems.ginger.clustering import cluster_nuggets, embed_texts
from preqrag.systems.ginger.generator import FLUENCY_SYSTEM, SUMMARY_SYSTEM, GingerGenerator
from preqrag.systems.ginger.nuggets import (MAX_NUGGETS_PER_PASSAGE, NUGGET_FORMAT, NUGGET_SYSTEM,
                                            NUMBERED_FORMAT, candidate_excerpts, numbered_passage)
from preqrag.systems.ginger.pairwise import (CrossEncoderPreference, DuoT5Preference, PairwiseStep,
                                             pairwise_order)
from preqrag.index.embedded import Index
from preqrag.core.records import LiveRAGAnswer, Question
from preqrag.models.rerankers import load_reranker
from preqrag.core.contracts import LLMError
from fakes import HandlerLLM as ScriptedLLM, server_down as _fail


@pytest.fixture(scope="module")
def index(small_index, test_config):
    return Index.open(small_index, test_config)


@pytest.fixture(scope="module")
def reranker(test_config):
    return load_reranker(test_config.cross_encoder)


def _ginger_cfg(**over):
    """The ginger preset; nuggets from the (scripted) LLM unless ``nugget_detector`` is given."""
    return load_config(None, {**TEST_OVERRIDES, "ginger": {"nugget_detector": "llm", **over}}, pipeline="ginger")


# ------------------------------------------------------------------ 2. pairwise reranking
def test_pairwise_step_on_real_smoke_passages(index, small_corpus, reranker):
    """The offline preference (Bradley-Terry over the cross-encoder) with sym-sum reproduces
    the cross-encoder's order of the head: the documented property of the stand-in."""
    q = small_corpus[2][0]["question"]
    (r,) = index.sparse.search([q], 12)
    step = PairwiseStep(CrossEncoderPreference(reranker), top_k=6)
    (out,) = step.rerank([q], [r], index.text)
    head = r.ids[:6]
    ce = reranker.score([(q, index.text(p)) for p in head])
    assert out.ids[:6] == [head[i] for i in np.argsort(-ce, kind="stable")]
    assert out.ids[6:] == r.ids[6:]
    assert all(0.0 <= s <= 10.0 for s in out.scores[:6])  # sym-sum lies in [0, 2(k-1)]
    assert out.scores == sorted(out.scores, reverse=True)
    p = CrossEncoderPreference(reranker).prefer([(q, index.text(head[0]), index.text(head[1]))] * 2)
    assert p.shape == (2,) and 0 < p[0] < 1


def test_duot5_loading_path_with_a_tiny_local_t5(tmp_path):
    """The duoT5 code path (T5ForConditionalGeneration, prompt, true/false logits) on a tiny
    randomly initialised T5 saved locally; the real castorini/duot5-base-msmarco needs the hub."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "Query:": 3, "Document0:": 4, "Document1:": 5, "Relevant:": 6}
    vocab.update({f"w{i}": i for i in range(7, 6200)})
    vocab.pop("w1176"), vocab.pop("w6136")
    vocab.update({"true": 1176, "false": 6136})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                                                unk_token="<unk>")
    fast.save_pretrained(tmp_path)
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=6200, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    transformers.T5ForConditionalGeneration(cfg).save_pretrained(tmp_path)
    scorer = DuoT5Preference(str(tmp_path), batch_size=2)
    triples = [("q", "a b", "c"), ("q", "c", "a b"), ("q", "x", "y")]
    p = scorer.prefer(triples)
    assert p.shape == (3,) and np.all((p > 0) & (p < 1))
    order, _ = pairwise_order("q", ["a b", "c", "x"], scorer)
    assert sorted(order) == [0, 1, 2]


# ------------------------------------------------------------------ 3. nuggets
def test_clustering_groups_identical_nuggets(index):
    texts = ["Corals expel algae when the water is too warm.", "Stock markets fell sharply on Monday.",
             "Corals expel algae when the water is too warm.", "The central bank raised interest rates."]
    labels, why = cluster_nuggets(texts, embed_texts(texts, index.encoder), "agglomerative", 0.5)
    assert why is None and labels[0] == labels[2] == 0
    assert labels[1] != labels[0] and labels[3] != labels[0]
    # without an embedder: TF-IDF vectors; identical texts still cluster together
    labels, _ = cluster_nuggets(texts, embed_texts(texts, None), "agglomerative", 0.5)
    assert labels[0] == labels[2] and labels[1] != labels[0]
    # bertopic: used when installed, else a recorded fallback to agglomerative
    labels, why = cluster_nuggets(texts, embed_texts(texts, index.encoder), "bertopic", 0.5)
    assert len(labels) == 4 and (why is None or why.startswith("clustering: bertopic"))


# ------------------------------------------------------------------ 4. generation
def _first_sentence(passage: str) -> str:
    return re.split(r"(?<=[.!?])\s+", passage.strip())[0]


def _smoke_contexts(index, small_corpus, n=3):
    q = small_corpus[2][0]["question"]
    (r,) = index.sparse.search([q], n)
    return q, [index.text(p) for p in r.ids]


def _annotate_first_sentence_of(passages_to_tag):
    """Nugget handler: names the first sentence of chosen passages, plus one that is not there
    (an invented excerpt, or a sentence number the passage does not have)."""
    numbered = NUMBERED_FORMAT.format(k=MAX_NUGGETS_PER_PASSAGE)

    def handle(user):
        if user.endswith(numbered):  # [ginger] nugget_reply = "numbers" (the default)
            shown = user[:-len(numbered)].split(" Passage: ", 1)[1]
            if any(shown == numbered_passage(p)[0] for p in passages_to_tag):
                return json.dumps({"nuggets": [1, 99]})
            return json.dumps({"nuggets": []})
        assert user.endswith(NUGGET_FORMAT)
        passage = user[:-len(NUGGET_FORMAT)].split(" Passage: ", 1)[1]
        if any(passage == p for p in passages_to_tag):
            return json.dumps({"nuggets": [_first_sentence(passage), "an invented fact"]})
        return json.dumps({"nuggets": []})
    return handle


def test_cross_encoder_nuggets_need_no_llm_call(index, small_corpus, reranker):
    q, ctx = _smoke_contexts(index, small_corpus)
    llm = ScriptedLLM({SUMMARY_SYSTEM: lambda u: u.rstrip("."), FLUENCY_SYSTEM: _fail})
    cfg = _ginger_cfg(cluster_ranking="passage-rank", nugget_detector="cross-encoder")
    gen = GingerGenerator(llm, cfg.ginger, cfg.generator, index.encoder, cross_encoder=lambda: reranker)
    (g,) = gen.generate([q], [ctx])
    assert not any(system == NUGGET_SYSTEM for system, _, _ in llm.calls)
    nuggets = g.details.nuggets
    for pi, passage in enumerate(ctx, 1):
        mine = [n for n in nuggets if n.passage == pi]
        assert 1 <= len(mine) <= MAX_NUGGETS_PER_PASSAGE
        assert [n.start for n in mine] == sorted(n.start for n in mine)  # passage order
        assert all(passage[n.start:n.end] == n.text for n in mine)
        others = [s for s in candidate_excerpts(passage) if s not in {n.text for n in mine}]
        if others:  # the kept sentences outscore the passage's other sentences
            kept = reranker.score([(q, n.text) for n in mine])
            assert kept.min() >= reranker.score([(q, s) for s in others]).max()
    assert g.citations and not any("nuggets: none detected" in f for f in g.fallbacks)


@pytest.mark.parametrize("mode", ["numbers", "excerpts"])
def test_generator_citations_point_to_nugget_passages(index, small_corpus, mode):
    q, ctx = _smoke_contexts(index, small_corpus)
    tagged = [ctx[0], ctx[2]]
    llm = ScriptedLLM({NUGGET_SYSTEM: _annotate_first_sentence_of(tagged),
                       SUMMARY_SYSTEM: lambda u: u.rstrip("."),  # the cluster text is its own summary
                       FLUENCY_SYSTEM: lambda u: u.split(" Response: ", 1)[1]})  # unchanged rephrasing
    cfg = _ginger_cfg(cluster_ranking="passage-rank", nugget_reply=mode)
    (g,) = GingerGenerator(llm, cfg.ginger, cfg.generator, index.encoder).generate([q], [ctx])
    assert g.details.fluency.used is True and g.details.fluency.after and g.details.fluency.before
    nuggets = g.details.nuggets
    assert {n.passage for n in nuggets} == {1, 3}
    for n in nuggets:
        assert ctx[n.passage - 1][n.start:n.end] == n.text
    assert sorted(i for c in g.details.clusters for i in c.nuggets) == list(range(len(nuggets)))
    assert g.details.cluster_ranking in ("passage-rank", None)
    assert g.details.summaries and all(0 <= s.cluster < len(g.details.clusters) for s in g.details.summaries)
    why = "no such sentence" if mode == "numbers" else "not in passage"
    assert f"generate: nuggets: passage 1: dropped 1 ({why})" in g.fallbacks
    assert g.citations and all(set(nums) <= {1, 3} and nums for _, nums in g.citations)
    cited = set().union(*[set(nums) for _, nums in g.citations])
    assert cited == {1, 3}
    assert g.answer == " ".join(s for s, _ in g.citations)
    assert len(g.answer.split()) <= cfg.generator.max_words
    assert g.final_prompt.startswith(FLUENCY_SYSTEM) and q in g.final_prompt


def test_generator_pairwise_cluster_ranking_on_real_cross_encoder(index, small_corpus, reranker):
    q, ctx = _smoke_contexts(index, small_corpus)
    llm = ScriptedLLM({NUGGET_SYSTEM: _annotate_first_sentence_of(ctx), SUMMARY_SYSTEM: lambda u: u.rstrip("."),
                       FLUENCY_SYSTEM: _fail})
    cfg = _ginger_cfg()
    gen = GingerGenerator(llm, cfg.ginger, cfg.generator, index.encoder, lambda: CrossEncoderPreference(reranker))
    (g,) = gen.generate([q], [ctx])
    texts = [c.text for c in g.details.clusters]
    assert g.details.cluster_ranking == "pairwise" and len(texts) > 1
    scores = [c.score for c in g.details.clusters]
    assert scores == sorted(scores, reverse=True)  # sym-sum, best first
    ce = reranker.score([(q, t) for t in texts])
    assert list(ce) == sorted(ce, reverse=True)  # clusters ranked by (pairwise) relevance
    assert g.fallbacks[-1].startswith("generate: fluency: llm error")
    assert not g.details.fluency.used and g.details.fluency.after is None
    assert g.details.fluency.fallback.startswith("llm error") and g.final_prompt.startswith(SUMMARY_SYSTEM)


def test_generator_falls_back_on_failing_or_junk_llm(index, small_corpus):
    q, ctx = _smoke_contexts(index, small_corpus)
    cfg = _ginger_cfg(cluster_ranking="passage-rank")
    for handler in (_fail, lambda u: "lorem ipsum <START>dolor</END>"):
        llm = ScriptedLLM({NUGGET_SYSTEM: handler, SUMMARY_SYSTEM: handler, FLUENCY_SYSTEM: handler})
        (g,) = GingerGenerator(llm, cfg.ginger, cfg.generator, index.encoder).generate([q], [ctx])
        assert g.answer and not isinstance(g.answer, LLMError)
        assert "generate: nuggets: none detected; each passage's sentence closest to the question used" in g.fallbacks
        assert any(f.startswith("generate: summary 1:") for f in g.fallbacks)
        assert any(f.startswith("generate: fluency:") for f in g.fallbacks)
        for sentence, nums in g.citations:  # fallback sentences are verbatim passage text
            assert nums and any(sentence in ctx[n - 1] for n in nums)


def test_fluency_that_adds_information_is_rejected(index, small_corpus):
    q, ctx = _smoke_contexts(index, small_corpus)
    llm = ScriptedLLM({NUGGET_SYSTEM: _annotate_first_sentence_of(ctx[:1]), SUMMARY_SYSTEM: lambda u: u.rstrip("."),
                       FLUENCY_SYSTEM: lambda u: u.split(" Response: ", 1)[1]
                       + " The Eiffel Tower was painted green in 1850 by pirates."})
    cfg = _ginger_cfg(cluster_ranking="passage-rank")
    (g,) = GingerGenerator(llm, cfg.ginger, cfg.generator, index.encoder).generate([q], [ctx])
    assert "generate: fluency: sentence without support; the summaries used as they are" in g.fallbacks
    assert "Eiffel" not in g.answer and [n for _, n in g.citations] == [[1]]


def test_generator_word_limit(index, small_corpus):
    q, ctx = _smoke_contexts(index, small_corpus)
    llm = ScriptedLLM({NUGGET_SYSTEM: _annotate_first_sentence_of(ctx), SUMMARY_SYSTEM: lambda u: u.rstrip("."),
                       FLUENCY_SYSTEM: lambda u: u.split(" Response: ", 1)[1]})
    cfg = load_config(None, {**TEST_OVERRIDES, "generator": {"max_words": 12},
                             "ginger": {"cluster_ranking": "passage-rank", "nugget_detector": "llm"}},
                      pipeline="ginger")
    (g,) = GingerGenerator(llm, cfg.ginger, cfg.generator, index.encoder).generate([q], [ctx])
    assert len(g.answer.split()) <= 12


# ------------------------------------------------------------------ 5. end to end
@pytest.mark.slow
def test_ginger_preset_end_to_end(small_index, small_corpus):
    from preqrag.run.pipeline import Pipeline

    cfg = load_config(None, {**TEST_OVERRIDES, "rewriter": {"max_new_tokens": 24},
                             "generator": {"context_top_k": 2},
                             "ginger": {"pairwise_top_k": 4, "nugget_max_new_tokens": 48, "max_sentences": 2,
                                        "summary_max_new_tokens": 24, "fluency_max_new_tokens": 48}},
                      pipeline="ginger")
    p = Pipeline.from_config(small_index, cfg)
    assert [s.name for s in p.rerank_chain] == ["cross-encoder", "pairwise"]
    qs = [Question(id=q["id"], question=q["question"]) for q in small_corpus[2][3:4]]  # a multi-doc one
    outcomes = p.answer(qs)
    for o in outcomes:
        assert o.failure is None, o.failure
        a = LiveRAGAnswer.model_validate(o.answer.model_dump())
        assert 1 <= len(a.passages) <= 2 and a.answer.strip()
        t = o.trace
        assert set(t.rankings) == {"sparse", "dense", "merged", "reranked", "pairwise", "final"}
        assert len(t.rankings["pairwise"][0]) <= cfg.cross_encoder.depth
        assert t.context_ids == t.rankings["pairwise"][0].ids[:2]
        assert t.plan.rewriter == "ginger" and len(t.plan.sub_queries) == 1
        assert t.plan.sub_queries[0].sparse == o.question.question
        assert {"rewrite", "rerank", "pairwise", "generate"} <= set(t.seconds)
        assert t.citations and all(set(c.passage_ids) <= set(t.context_ids) and c.passage_ids
                                   for c in t.citations)
        assert a.answer == " ".join(c.sentence for c in t.citations)
        assert all(f.split(":")[0] in {"answer", "rewrites", "rewrite", "classify", "generate"} for f in t.fallbacks)
