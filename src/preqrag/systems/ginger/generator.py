"""GINGER's nugget-based response generation (UiS-IAI@LiveRAG §3.2-3.3, App. B.2-B.3; Łajewska &
Balog, "GINGER: Grounded Information Nugget-Based Generation of Responses", SIGIR 2025).

For each question, over its top-m context passages (m = ``generator.context_top_k``):

1. **nugget detection** (§3.2, App. B.2): the LLM picks each passage's relevant excerpts,
   constrained to the passage's own sentences by a JSON schema
   (:func:`~preqrag.systems.ginger.nuggets.nugget_schema`; the paper copies the passage with tags,
   a deviation stated there); only excerpts found verbatim in the passage are kept
   (:func:`~preqrag.systems.ginger.nuggets.parse_nugget_reply`); a question
   with no nugget at all falls back to each passage's sentence closest to the question;
2. **clustering** (§3.2) of the nuggets' embeddings (:mod:`~preqrag.systems.ginger.clustering`);
3. **cluster ranking** (§3.2): DuoT5-style pairwise preferences on the clusters' text with
   sym-sum (``[ginger] cluster_ranking = "pairwise"``, the paper) or the best rank of the
   passages a cluster's nuggets come from (``"passage-rank"``);
4. **one-sentence summary** per top cluster (§3.3, App. B.3), at most ``max_sentences``
   clusters and ``generator.max_words`` words (the response length limit, Fig. 1);
5. **fluency pass** (§3.3, App. B.3): the LLM rephrases the joined summaries.

Attribution: every summary sentence cites the passages its cluster's nuggets came from. After
the fluency pass each rephrased sentence is aligned to the summary sentences by embedding
cosine and cites the passages of those it matches (cosine ≥ :data:`ALIGN_MIN`); a rephrasing
with a sentence that matches no summary (added information) or that loses a summary
(dropped information) is rejected and the summaries are the answer (a recorded fallback).

Every LLM step falls back instead of failing: an annotation without verbatim nuggets drops
them, a failed or unusable summary is replaced by the cluster's first nugget (verbatim text), a
failed or unfaithful fluency reply by the joined summaries. Fallbacks are returned in
:attr:`GingerGenerated.fallbacks` (the pipeline puts them in ``Trace.fallbacks``); prompts cut
to fit the LLM's window in ``truncations``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...core.config import GeneratorConfig
from .settings import GingerConfig
from ...components.generation import CHAT_TEMPLATE_MARGIN, Generated
from ...core.records import ClusterRecord, FluencyRecord, GenerationDetails, NuggetRecord, SummaryRecord
from ...core.contracts import LLM, LLMError
from ...core.text import cap_tokens, content_words, split_sentences, word_support
from .clustering import cluster_nuggets, embed_texts
from ...models.llm.structured import chat_grouped
from .nuggets import (MAX_NUGGETS_PER_PASSAGE, MAX_NUMBERED, NUGGET_FORMAT, NUGGET_SYSTEM, NUGGET_USER,
                      NUMBER_REPLY_TOKENS, NUMBERED_FORMAT, Nugget, best_in_order, candidate_excerpts, fallback_nugget,
                      keep_verbatim, nugget_schema, number_schema, numbered_passage, parse_number_reply,
                      parse_nugget_reply)
from .pairwise import PairScorer, pairwise_order

# Appendix B.3, verbatim.
SUMMARY_SYSTEM = ("Summarize the provided information into one sentence (approximately 35 words). Generate "
                  "one-sentence long summary that is short, concise and only contains the information provided.")
SUMMARY_USER = "{information_cluster}."
FLUENCY_SYSTEM = ("Rephrase the response given a query to improve its fluency. Do not change the information "
                  "included in the response. Do not add information not mentioned in the original response.")
FLUENCY_USER = "Question: {query} Response: {response}"

NUGGET_JOIN = "; "
"""Separator of a cluster's nuggets in its text (the authors' ``"; ".join(cluster_docs)``)."""
SUMMARY_MAX_WORDS = 70
"""A summary sentence longer than twice the ~35 words App. B.3 asks for is rejected."""
SUMMARY_MIN_SUPPORT = 0.5
"""Share of a summary's content words (stems) that must occur in its cluster: App. B.3 asks for
a summary that "only contains the information provided"; paraphrase keeps most words."""
ALIGN_MIN = 0.5
"""Cosine (index embedder) at which a rephrased sentence counts as carrying a summary sentence."""
FLUENCY_MAX_RATIO = 1.5
"""A rephrasing longer than 1.5 times the summaries (plus 20 words) is rejected (it adds)."""
_PREFIX = re.compile(r"^\s*(?:summary|response|rephrased response|answer)\s*:\s*", re.I)


GingerGenerated = Generated
"""GINGER's answers are :class:`preqrag.components.generation.Generated`: ``fallbacks`` holds every LLM
output rejected or failed and what was used instead (prefixed ``generate:``; the pipeline
appends them to ``Trace.fallbacks``) and ``details`` a :class:`~preqrag.core.records.GenerationDetails`
(the pipeline puts it in ``Trace.generation``): ``nuggets`` ([{text, passage (1-based), start,
end}]), ``clusters`` in ranked order ([{nuggets (indices), passages, text, score}]),
``cluster_ranking``, ``summaries`` ([{cluster, text, fallback}]) and ``fluency`` ({before,
after, used, fallback}; None when no fluency pass ran)."""


def _messages(system: str, user: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _prompt_text(messages: list[dict]) -> str:
    return "\n\n".join(m["content"] for m in messages)


def _clean_reply(reply: str) -> str:
    return _PREFIX.sub("", reply.strip()).strip().strip("\"'“”`").strip()


def cap_words(sentences: list[tuple[str, list[int]]], max_words: int) -> list[tuple[str, list[int]]]:
    """Sentences, in order, until ``max_words`` words; the sentence that crosses the limit is
    cut to the words left (the response length limit)."""
    out: list[tuple[str, list[int]]] = []
    left = max_words
    for s, src in sentences:
        words = s.split()
        if left <= 0:
            break
        if len(words) > left:
            out.append((" ".join(words[:left]), src))
            break
        out.append((s, src))
        left -= len(words)
    return out


class _Cluster(NamedTuple):
    nuggets: list[Nugget]
    text: str
    passages: list[int]  # 0-based, sorted
    score: float | None = None  # the ranking's score (pairwise: sym-sum)


class GingerGenerator:
    """Generator ``ginger`` (see the module docstring).

    Args:
        llm: the shared LLM.
        cfg: the ``[ginger]`` table (clustering, ranking, summary and fluency settings).
        gen_cfg: ``generator.max_words`` (response word cap, 300: LiveRAG reads 300 words).
        encoder: the index's embedder (nugget clustering, fallback sentences, alignment), or
            ``None`` (TF-IDF and word overlap instead).
        pair_scorer: a callable returning the pair scorer (called on first use, so a duoT5
            model loads only when clusters are ranked pairwise).
        cross_encoder: a callable returning the cross-encoder that scores sentences for
            ``[ginger] nugget_detector = "cross-encoder"`` (``score(pairs) -> ndarray (n,)``).
    """

    name = "ginger"

    def __init__(self, llm: LLM, cfg: GingerConfig, gen_cfg: GeneratorConfig, encoder=None,
                 pair_scorer: Callable[[], PairScorer] | None = None,
                 cross_encoder: Callable[[], object] | None = None):
        self.llm = llm
        self._cross_encoder = cross_encoder
        self.cfg = cfg
        self.gen_cfg = gen_cfg
        self.encoder = encoder
        self._pair_scorer_factory = pair_scorer
        self._pair_scorer: PairScorer | None = None

    # ---------------------------------------------------------------- helpers
    def _scorer(self) -> PairScorer:
        if self._pair_scorer is None:
            if self._pair_scorer_factory is None:
                raise ValueError("ginger.cluster_ranking = 'pairwise' needs a pair scorer")
            self._pair_scorer = self._pair_scorer_factory()
        return self._pair_scorer

    def _similarity(self, a: list[str], b: list[str]) -> np.ndarray:
        """``(len(a), len(b))`` similarities: embedder cosine, else word-overlap (Dice)."""
        if self.encoder is not None:
            ea = np.asarray(self.encoder.encode(a, is_query=False), dtype=np.float32)
            eb = np.asarray(self.encoder.encode(b, is_query=False), dtype=np.float32)
            return ea @ eb.T
        wa, wb = [content_words(x) for x in a], [content_words(x) for x in b]
        return np.array([[2 * len(x & y) / max(1, len(x) + len(y)) for y in wb] for x in wa])

    def _nugget_requests(self, questions: list[str], contexts: list[list[str]], count, window: int):
        """The nugget calls of a batch: ``(requests, slots, cuts, excerpts)``; a request is
        ``(messages, max_tokens, schema)``, its slot ``(question, passage)``; ``excerpts[slot]``
        the numbered sentences it offers (``nugget_reply = "numbers"``)."""
        if self.cfg.nugget_reply == "numbers":
            return self._numbered_requests(questions, contexts, count, window)
        requests, slots, cuts = [], [], [[] for _ in questions]
        fixed = count(NUGGET_SYSTEM) + CHAT_TEMPLATE_MARGIN + 16
        for qi, (q, passages) in enumerate(zip(questions, contexts)):
            qtext, cut = cap_tokens(q, self.cfg.max_question_tokens, count)
            if cut:
                cuts[qi].append(f"generate: nuggets: question cut to {self.cfg.max_question_tokens} tokens")
            for pi, p in enumerate(passages):
                if not p.strip():
                    continue
                # the reply copies the passage: prompt + reply ~ fixed + question + 2.2 * passage
                room = int((window - fixed - count(qtext) - 48) / 2.2)
                ptext, pcut = cap_tokens(p, max(16, room), count)
                if pcut:
                    cuts[qi].append(f"generate: nuggets: passage {pi + 1}: {count(p)} -> {count(ptext)} tokens")
                fit = nugget_schema(ptext, count, self.cfg.nugget_max_new_tokens)
                if fit is None:
                    cuts[qi].append(f"generate: nuggets: passage {pi + 1}: no sentence fits the reply budget")
                    continue
                schema, max_new = fit
                requests.append((_messages(NUGGET_SYSTEM, NUGGET_USER.format(query=qtext, passage=ptext)
                                           + NUGGET_FORMAT), max_new, schema))
                slots.append((qi, pi))
        return requests, slots, cuts, {}

    def _numbered_requests(self, questions: list[str], contexts: list[list[str]], count, window: int):
        """``nugget_reply = "numbers"``: each passage as numbered sentences, one schema and
        reply budget for the whole batch (one batched call)."""
        texts, slots, cuts, excerpts = [], [], [[] for _ in questions], {}
        fixed = count(NUGGET_SYSTEM) + count(NUMBERED_FORMAT) + CHAT_TEMPLATE_MARGIN + NUMBER_REPLY_TOKENS + 16
        for qi, (q, passages) in enumerate(zip(questions, contexts)):
            qtext, cut = cap_tokens(q, self.cfg.max_question_tokens, count)
            if cut:
                cuts[qi].append(f"generate: nuggets: question cut to {self.cfg.max_question_tokens} tokens")
            for pi, p in enumerate(passages):
                ptext, pcut = cap_tokens(p, max(16, window - fixed - count(qtext)), count)
                shown, offered = numbered_passage(ptext, qtext, self.cfg.nugget_sentences)
                if not offered:
                    continue
                if pcut:
                    cuts[qi].append(f"generate: nuggets: passage {pi + 1}: {count(p)} -> {count(ptext)} tokens")
                texts.append(NUGGET_USER.format(query=qtext, passage=shown)
                             + NUMBERED_FORMAT.format(k=MAX_NUGGETS_PER_PASSAGE))
                excerpts[(qi, pi)] = offered
                slots.append((qi, pi))
        schema = number_schema(max((len(e) for e in excerpts.values()), default=1))
        requests = [(_messages(NUGGET_SYSTEM, t), NUMBER_REPLY_TOKENS, schema) for t in texts]
        return requests, slots, cuts, excerpts

    def _chat(self, requests: list[tuple]) -> list[str | LLMError]:
        """``chat_many`` grouped by reply budget and schema (one call per distinct pair);
        a request is ``(messages, max_tokens)`` or ``(messages, max_tokens, schema)``."""
        return chat_grouped(self.llm, [r[0] for r in requests], [r[2] if len(r) > 2 else None for r in requests],
                            [r[1] for r in requests], temperature=0.0)

    def _clusters(self, question: str, nuggets: list[Nugget], embeddings: np.ndarray,
                  fallbacks: list[str]) -> list[_Cluster]:
        labels, why = cluster_nuggets([n.text for n in nuggets], embeddings, self.cfg.clustering,
                                      self.cfg.cluster_distance_threshold)
        if why:
            fallbacks.append(why)
        groups: dict[int, list[Nugget]] = {}
        for n, lab in zip(nuggets, labels):
            groups.setdefault(lab, []).append(n)
        clusters = []
        for members in groups.values():
            members = sorted(members, key=lambda n: (n.passage, n.start))
            texts: list[str] = []
            for n in members:
                if n.text not in texts:
                    texts.append(n.text)
            clusters.append(_Cluster(members, NUGGET_JOIN.join(texts), sorted({n.passage for n in members})))
        if self.cfg.cluster_ranking == "pairwise" and len(clusters) > 1:
            order, scores = pairwise_order(question, [c.text for c in clusters], self._scorer())
            return [clusters[i]._replace(score=sc) for i, sc in zip(order, scores)]
        return sorted(clusters, key=lambda c: (c.passages[0], -len(c.nuggets)))

    # ---------------------------------------------------------------- generate
    def generate(self, questions: list[str], contexts: list[list[str]],
                 extras: list[dict] | None = None) -> list[GingerGenerated]:
        """One :class:`GingerGenerated` per question; ``citations`` number the context passages
        from 1. Never raises for LLM trouble (fallbacks are recorded)."""
        count, window = self.llm.count_tokens, self.llm.context_window
        fallbacks: list[list[str]] = [[] for _ in questions]
        nuggets, truncations = self._detect(questions, contexts, count, window, fallbacks)  # 1
        clusters = self._cluster_batch(questions, nuggets, fallbacks)  # 2-3
        drafts, summary_prompts, summary_records = self._summarise(clusters, count, window, truncations,
                                                                   fallbacks)  # 4
        fluent = self._fluency(questions, drafts, count)  # 5
        out = []
        for qi, q in enumerate(questions):
            final = drafts[qi]
            prompt = "\n\n---\n\n".join(summary_prompts[qi])
            fluency = None
            if qi in fluent:
                (msgs, _), reply = fluent[qi]
                aligned, why = self._align(reply, drafts[qi])
                fluency = FluencyRecord(before=" ".join(s for s, _ in drafts[qi]), used=aligned is not None,
                                        after=None if isinstance(reply, LLMError) else _clean_reply(reply),
                                        fallback=why)
                if aligned is None:
                    fallbacks[qi].append(f"fluency: {why}; the summaries used as they are")
                else:
                    final, prompt = cap_words(aligned, self.gen_cfg.max_words), _prompt_text(msgs)
            details = self._details(nuggets[qi], clusters[qi], summary_records[qi], fluency)
            out.append(GingerGenerated(prompt, " ".join(s for s, _ in final), truncations[qi],
                                       [(s, list(src)) for s, src in final], 0,
                                       tuple(f"generate: {f}" for f in fallbacks[qi]), details))
        return out

    def _detect(self, questions: list[str], contexts: list[list[str]], count, window: int,
                fallbacks: list[list[str]]) -> tuple[list[list[Nugget]], list[list[str]]]:
        """Step 1, nugget detection: every passage of the batch in one ``chat_many`` per reply
        budget; per question its nuggets (each passage's closest sentence when none was found)
        and its prompt truncations. Rejected replies go to ``fallbacks``."""
        if self.cfg.nugget_detector == "cross-encoder":
            nuggets, truncations = self._scored_nuggets(questions, contexts), [[] for _ in questions]
        else:
            nuggets, truncations = self._annotated_nuggets(questions, contexts, count, window, fallbacks)
        for qi, (q, passages) in enumerate(zip(questions, contexts)):
            if not nuggets[qi] and any(p.strip() for p in passages):
                nuggets[qi] = [n for pi, p in enumerate(passages)
                               if (n := fallback_nugget(q, p, pi, self.encoder)) is not None]
                fallbacks[qi].append("nuggets: none detected; each passage's sentence closest to the question used")
        return nuggets, truncations

    def _scored_nuggets(self, questions: list[str], contexts: list[list[str]]) -> list[list[Nugget]]:
        """``nugget_detector = "cross-encoder"``: every passage's sentences
        (:func:`~preqrag.systems.ginger.nuggets.candidate_excerpts`) scored against the question in
        one cross-encoder call; a passage's :data:`MAX_NUGGETS_PER_PASSAGE` best are its nuggets,
        in passage order."""
        if self._cross_encoder is None:
            raise ValueError("ginger.nugget_detector = 'cross-encoder' needs a cross-encoder")
        slots = [(qi, pi, candidate_excerpts(p)[:MAX_NUMBERED]) for qi, ps in enumerate(contexts)
                 for pi, p in enumerate(ps) if p.strip()]
        pairs = [(questions[qi], e) for qi, _, ex in slots for e in ex]
        scores = np.asarray(self._cross_encoder().score(pairs), dtype=np.float32) if pairs else np.zeros(0)
        nuggets: list[list[Nugget]] = [[] for _ in questions]
        lo = 0
        for qi, pi, ex in slots:
            sc = scores[lo:lo + len(ex)]
            lo += len(ex)
            best = best_in_order(sc, MAX_NUGGETS_PER_PASSAGE)
            nuggets[qi] += keep_verbatim([ex[j] for j in best], contexts[qi][pi], pi)[0]
        return nuggets

    def _annotated_nuggets(self, questions: list[str], contexts: list[list[str]], count, window: int,
                           fallbacks: list[list[str]]) -> tuple[list[list[Nugget]], list[list[str]]]:
        """``nugget_detector = "llm"``: the nugget calls (:meth:`_nugget_requests`), parsed."""
        requests, slots, truncations, offered = self._nugget_requests(questions, contexts, count, window)
        replies = self._chat(requests)
        nuggets: list[list[Nugget]] = [[] for _ in questions]
        for (qi, pi), reply in zip(slots, replies):
            if isinstance(reply, LLMError):
                fallbacks[qi].append(f"nuggets: passage {pi + 1}: llm error: {reply}")
                continue
            if (qi, pi) in offered:
                found, rejected = parse_number_reply(reply, offered[(qi, pi)], contexts[qi][pi], pi)
            else:
                found, rejected = parse_nugget_reply(reply, contexts[qi][pi], pi)
            if rejected:
                fallbacks[qi].append(f"nuggets: passage {pi + 1}: dropped {len(rejected)} "
                                     f"({', '.join(sorted(set(rejected)))})")
            nuggets[qi] += found
        return nuggets, truncations

    def _cluster_batch(self, questions: list[str], nuggets: list[list[Nugget]],
                       fallbacks: list[list[str]]) -> list[list[_Cluster]]:
        """Steps 2-3: one embedding call for the batch's nuggets, then each question's nuggets
        clustered and the clusters ranked (:meth:`_clusters`)."""
        flat = [n.text for ns in nuggets for n in ns]
        emb = embed_texts(flat, self.encoder) if flat else np.zeros((0, 1), dtype=np.float32)
        clusters: list[list[_Cluster]] = []
        lo = 0
        for qi, q in enumerate(questions):
            k = len(nuggets[qi])
            clusters.append(self._clusters(q, nuggets[qi], emb[lo:lo + k], fallbacks[qi]) if k else [])
            lo += k
        return clusters

    def _summarise(self, clusters: list[list[_Cluster]], count, window: int, truncations: list[list[str]],
                   fallbacks: list[list[str]]):
        """Step 4: one summary sentence per top cluster (``max_sentences``), all in one call;
        per question ``(drafts, summary prompts, summary records)``, drafts cut to ``max_words``."""
        cfg = self.cfg
        sreq, sslot = [], []
        for qi, cs in enumerate(clusters):
            for ci, c in enumerate(cs[:cfg.max_sentences]):
                room = window - cfg.summary_max_new_tokens - CHAT_TEMPLATE_MARGIN - count(SUMMARY_SYSTEM) - 8
                text, cut = cap_tokens(c.text, max(16, room), count)
                if cut:
                    truncations[qi].append(f"generate: summary {ci + 1}: cluster cut to {room} tokens")
                sreq.append((_messages(SUMMARY_SYSTEM, SUMMARY_USER.format(information_cluster=text)),
                             cfg.summary_max_new_tokens))
                sslot.append((qi, ci))
        summaries = self._chat(sreq)
        drafts: list[list[tuple[str, list[int]]]] = [[] for _ in clusters]
        summary_prompts: list[list[str]] = [[] for _ in clusters]
        summary_records: list[list[SummaryRecord]] = [[] for _ in clusters]
        for (qi, ci), (msgs, _), reply in zip(sslot, sreq, summaries):
            c = clusters[qi][ci]
            summary_prompts[qi].append(_prompt_text(msgs))
            sentence, why = self._check_summary(reply, c)
            if why:
                fallbacks[qi].append(f"summary {ci + 1}: {why}; the cluster's first nugget used")
            drafts[qi].append((sentence, [p + 1 for p in c.passages]))
            summary_records[qi].append(SummaryRecord(cluster=ci, text=sentence, fallback=why))
        return [cap_words(d, self.gen_cfg.max_words) for d in drafts], summary_prompts, summary_records

    def _fluency(self, questions: list[str], drafts: list, count) -> dict[int, tuple]:
        """Step 5: the fluency pass over each question's joined summaries, in one call;
        ``{question index: ((messages, max_tokens), reply)}`` (empty with ``fluency = false``)."""
        cfg = self.cfg
        freq, fslot = [], []
        if cfg.fluency:
            for qi, (q, d) in enumerate(zip(questions, drafts)):
                if d:
                    qtext, _ = cap_tokens(q, cfg.max_question_tokens, count)
                    freq.append((_messages(FLUENCY_SYSTEM, FLUENCY_USER.format(
                        query=qtext, response=" ".join(s for s, _ in d))), cfg.fluency_max_new_tokens))
                    fslot.append(qi)
        return dict(zip(fslot, zip(freq, self._chat(freq))))

    def _details(self, nuggets: list[Nugget], clusters: list[_Cluster], summaries: list[SummaryRecord],
                 fluency: FluencyRecord | None) -> GenerationDetails:
        """The trace record of one question's generation (:class:`GenerationDetails`)."""
        position = {id(n): i for i, n in enumerate(nuggets)}
        return GenerationDetails(
            generator=self.name,
            nuggets=[NuggetRecord(text=n.text, passage=n.passage + 1, start=n.start, end=n.end) for n in nuggets],
            clusters=[ClusterRecord(nuggets=[position[id(n)] for n in c.nuggets],
                                    passages=[p + 1 for p in c.passages], text=c.text, score=c.score)
                      for c in clusters],
            cluster_ranking=self.cfg.cluster_ranking if len(clusters) > 1 else None,
            summaries=summaries, fluency=fluency)

    def _check_summary(self, reply: str | LLMError, cluster: _Cluster) -> tuple[str, str | None]:
        """``(sentence, None)`` for a usable summary (its first sentence), else
        ``(first nugget, reason)``: ``llm error``, ``empty``, ``too long`` (over
        :data:`SUMMARY_MAX_WORDS` words), ``unsupported`` (fewer than
        :data:`SUMMARY_MIN_SUPPORT` of its content words in the cluster)."""
        fallback = cluster.nuggets[0].text
        if isinstance(reply, LLMError):
            return fallback, f"llm error: {reply}"
        sents = split_sentences(_clean_reply(reply))
        if not sents or not re.search(r"[A-Za-z0-9]", sents[0]):
            return fallback, "empty"
        sentence = sents[0]
        if len(sentence.split()) > SUMMARY_MAX_WORDS:
            return fallback, "too long"
        support = word_support(sentence, cluster.text)
        if support is not None and support < SUMMARY_MIN_SUPPORT:
            return fallback, "unsupported"
        return sentence, None

    def _align(self, reply: str | LLMError,
               draft: list[tuple[str, list[int]]]) -> tuple[list[tuple[str, list[int]]] | None, str | None]:
        """Cite each rephrased sentence with the passages of the summary sentences it matches.

        Returns ``(sentences with citations, None)``, or ``(None, reason)``: ``llm error``,
        ``empty``, ``too long``, ``sentence without support`` (matches no summary: added
        information), ``dropped information`` (a summary no sentence matches)."""
        if isinstance(reply, LLMError):
            return None, f"llm error: {reply}"
        sents = [s for s in split_sentences(_clean_reply(reply)) if re.search(r"[A-Za-z0-9]", s)]
        if not sents:
            return None, "empty"
        n_draft = sum(len(s.split()) for s, _ in draft)
        if sum(len(s.split()) for s in sents) > FLUENCY_MAX_RATIO * n_draft + 20:
            return None, "too long"
        sim = self._similarity(sents, [s for s, _ in draft])
        if (sim.max(axis=1) < ALIGN_MIN).any():
            return None, "sentence without support"
        if (sim.max(axis=0) < ALIGN_MIN).any():
            return None, "dropped information"
        out = []
        for i, s in enumerate(sents):
            src = sorted({p for j, (_, ps) in enumerate(draft) if sim[i, j] >= ALIGN_MIN for p in ps})
            out.append((s, src))
        return out, None
