"""Pairwise reranking after the pointwise stage, DuoT5 style (UiS-IAI@LiveRAG §3.1).

GINGER reranks with monoT5 (pointwise) and then duoT5 (pairwise) on the monoT5 top-k
(Pradeep, Nogueira & Lin, "The Expando-Mono-Duo Design Pattern for Text Ranking with
Pretrained Sequence-to-Sequence Models", arXiv 2101.05667, §3-4). A pair scorer gives, for
every ordered pair (a, b) of the top-k, ``p(a, b)``: the probability that ``a`` is more
relevant than ``b``; the pairs are aggregated with **sym-sum** (Pradeep et al., eq. 7; the
authors' ``DuoT5Reranker``):

    s_i = sum_{j != i} p(i, j) + sum_{j != i} (1 - p(j, i))

Pair scorers (``[ginger] pairwise_model``):

* :class:`DuoT5Preference` – ``castorini/duot5-base-msmarco`` by name (transformers
  ``T5ForConditionalGeneration``): input ``"Query: q Document0: a Document1: b Relevant:"``,
  ``p(a, b)`` = softmax over the logits of the tokens ``false`` (6136) and ``true`` (1176)
  at the first decoder step, as in the authors' code. Needs the model hub (not offline).
* :class:`CrossEncoderPreference` (offline default) – the bundled cross-encoder's
  (``[cross_encoder]``) logits ``s(q, a)``, ``s(q, b)`` and ``p(a, b) = sigmoid(s(q,a) - s(q,b))``
  (a Bradley-Terry preference). **A stated deviation**: a pointwise cross-encoder cannot judge a
  pair jointly, so any preference it yields is a function of its two pointwise scores, and
  sym-sum of this one is ``2 * sum_j sigmoid(s_i - s_j)``, monotone in ``s_i``: offline, the
  pairwise step keeps the cross-encoder's order (it re-derives the scores of the top-k, which
  the shared cross-encoder answers from its memory of the rerank step's pairs,
  :class:`~preqrag.models.rerankers.cache.RecentScores`). Feeding both passages into one cross-encoder input ("q [SEP] a b" against
  "q [SEP] b a") was rejected: the model was trained on one passage per input, the 512-token
  window truncates the second passage, and the score difference would measure position bias
  rather than relative relevance. With internet, ``pairwise_model =
  "castorini/duot5-base-msmarco"`` runs the paper's model through the same step.

The same scorers rank nugget clusters in the generator (§3.2).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import permutations
from typing import Protocol

import numpy as np

from ...core.records import Ranking
from ...core.contracts import Reranker
from ...core.timing import model_time

DUOT5 = "castorini/duot5-base-msmarco"
"""The paper's pairwise reranker (§3.1, footnote 9)."""
DUOT5_TOKENIZER = "google-t5/t5-base"
"""Tokenizer used when the model directory has none (the authors load ``t5-base``'s)."""
DUOT5_TRUE, DUOT5_FALSE = 1176, 6136
"""T5 vocabulary ids of ``true`` and ``false`` (the authors' code; Pradeep et al. §3)."""
DUOT5_MAX_LENGTH = 1024
"""Input tokens of a duoT5 pair (the authors' ``DuoT5Reranker(max_seq_len=1024)``)."""


class PairScorer(Protocol):
    """Pairwise preferences: ``prefer(triples)[i]`` is p(a ≻ b) in [0, 1] for
    ``triples[i] = (query, text_a, text_b)``; ``float64`` array of shape ``(len(triples),)``."""

    name: str

    def prefer(self, triples: list[tuple[str, str, str]]) -> np.ndarray: ...

    def warm_up(self) -> None:
        """Load the scoring model now."""
        ...


def sym_sum(n: int, pairs: list[tuple[int, int]], probs: np.ndarray) -> np.ndarray:
    """Sym-sum aggregation (Pradeep et al. 2021, eq. 7): for every ordered pair ``(i, j)`` with
    preference ``p``, ``s_i += p`` and ``s_j += 1 - p``. Returns the ``n`` scores (``float64``);
    with all ordered pairs of n items, each score lies in ``[0, 2(n-1)]``."""
    scores = np.zeros(n, dtype=np.float64)
    for (i, j), p in zip(pairs, probs):
        scores[i] += float(p)
        scores[j] += 1.0 - float(p)
    return scores


def pairwise_order(query: str, texts: list[str], scorer: PairScorer) -> tuple[list[int], list[float]]:
    """Rank ``texts`` for ``query`` by sym-sum over all ordered pairs: ``(order, scores)``,
    best first; ties keep the input order."""
    if len(texts) < 2:
        return list(range(len(texts))), [0.0] * len(texts)
    pairs = list(permutations(range(len(texts)), 2))
    probs = scorer.prefer([(query, texts[i], texts[j]) for i, j in pairs])
    s = sym_sum(len(texts), pairs, probs)
    order = sorted(range(len(texts)), key=lambda i: (-s[i], i))
    return order, [float(s[i]) for i in order]


class CrossEncoderPreference:
    """Offline pair scorer: ``p(a ≻ b) = sigmoid(s(q, a) - s(q, b))`` from the cross-encoder's
    logits (a Bradley-Terry preference; see the module docstring for why, and its limits).

    Each distinct (query, text) pair of a call is scored once, in one ``reranker.score`` call.
    """

    def __init__(self, reranker: Reranker):
        self.reranker = reranker
        self.name = f"bradley-terry({reranker.name})"

    def warm_up(self) -> None:
        self.reranker.warm_up()

    def prefer(self, triples: list[tuple[str, str, str]]) -> np.ndarray:
        index: dict[tuple[str, str], int] = {}
        for q, a, b in triples:
            for t in (a, b):
                index.setdefault((q, t), len(index))
        if not index:
            return np.zeros(0, dtype=np.float64)
        s = np.asarray(self.reranker.score(list(index)), dtype=np.float64)
        diff = np.array([s[index[(q, a)]] - s[index[(q, b)]] for q, a, b in triples], dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-diff))


class DuoT5Preference:
    """The paper's duoT5 (``castorini/duot5-base-msmarco``; §3.1), loaded with transformers.

    ``p(a ≻ b)`` = softmax(logit_false, logit_true)[true] at the first decoder step for
    ``"Query: {q} Document0: {a} Document1: {b} Relevant:"`` (Pradeep et al. 2021 §3; the
    authors' ``DuoT5Reranker``), inputs truncated to :data:`DUOT5_MAX_LENGTH` tokens, on CPU.

    Args:
        location: a hub name (needs internet) or a local directory with a T5 checkpoint.
        tokenizer: tokenizer name or directory; ``None`` = the model's own, else
            :data:`DUOT5_TOKENIZER`.
        batch_size: pairs per forward pass.

    Raises:
        ImportError (at first use): transformers or torch missing.
        OSError (at first use): the model cannot be found (offline, not cached).
    """

    def __init__(self, location: str = DUOT5, tokenizer: str | None = None, batch_size: int = 8,
                 max_length: int = DUOT5_MAX_LENGTH):
        self.location = location
        self.tokenizer_name = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length
        self.name = location
        self._model = None
        self._tokenizer = None

    def warm_up(self) -> None:
        self._load()

    def _load(self):
        if self._model is None:
            try:
                import torch  # noqa: F401
                from transformers import AutoTokenizer, T5ForConditionalGeneration
            except ImportError as e:  # pragma: no cover - torch and transformers are dependencies
                raise ImportError('duoT5 needs transformers and torch: pip install "sentence-transformers==6.2.0" '
                                  '"torch==2.13.0"') from e
            if self.tokenizer_name is not None:
                self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_name)
            else:
                try:
                    self._tokenizer = AutoTokenizer.from_pretrained(self.location)
                except (OSError, ValueError):  # duoT5 checkpoints ship without a tokenizer
                    self._tokenizer = AutoTokenizer.from_pretrained(DUOT5_TOKENIZER)
            self._model = T5ForConditionalGeneration.from_pretrained(self.location).eval()
        return self._model, self._tokenizer

    def prefer(self, triples: list[tuple[str, str, str]]) -> np.ndarray:
        if not triples:
            return np.zeros(0, dtype=np.float64)
        import torch

        model, tok = self._load()
        out = np.zeros(len(triples), dtype=np.float64)
        texts = [f"Query: {q} Document0: {a} Document1: {b} Relevant:" for q, a, b in triples]
        start = model.config.decoder_start_token_id
        for lo in range(0, len(texts), self.batch_size):
            enc = tok(texts[lo:lo + self.batch_size], truncation=True, padding=True, max_length=self.max_length,
                      return_tensors="pt")
            decoder = torch.full((enc["input_ids"].shape[0], 1), start, dtype=torch.long)
            with torch.no_grad(), model_time("duot5"):
                logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                               decoder_input_ids=decoder).logits[:, -1, :]
            probs = torch.softmax(logits[:, [DUOT5_FALSE, DUOT5_TRUE]].float(), dim=1)[:, 1]
            out[lo:lo + len(probs)] = probs.numpy()
        return out


def load_pair_scorer(name: str, reranker: Reranker | None, batch_size: int = 8) -> PairScorer:
    """The pair scorer named by ``[ginger] pairwise_model``.

    Args:
        name: ``"cross-encoder"`` (offline: :class:`CrossEncoderPreference` over ``reranker``),
            or a duoT5 hub name / local T5 directory (:class:`DuoT5Preference`).
        reranker: the cross-encoder, needed for ``"cross-encoder"``.

    Raises:
        ValueError: ``"cross-encoder"`` with no cross-encoder (``cross_encoder.name = "none"``).
    """
    if name == "cross-encoder":
        if reranker is None:
            raise ValueError("ginger.pairwise_model = 'cross-encoder' needs a cross-encoder; "
                             "cross_encoder.name is 'none'")
        return CrossEncoderPreference(reranker)
    return DuoT5Preference(name, batch_size=batch_size)


class PairwiseStep:
    """Rerank step ``pairwise``: sym-sum pairwise reranking of the ``top_k`` head of each
    ranking (§3.1; k = ``[ginger] pairwise_top_k``); trace key ``pairwise``.

    The head is reordered by its sym-sum scores (``[0, 2(k-1)]``); the rest of the ranking
    follows unchanged (as the authors' ``DuoT5Reranker`` keeps the tail), with scores
    continuing below the head's lowest so that the output stays sorted. All pairs of the
    batch go to the scorer in one call.

    Args:
        scorer: the pair scorer (:func:`load_pair_scorer`).
        top_k: head size (k); the scorer sees ``k(k-1)`` ordered pairs per ranking.
    """

    name = "pairwise"
    stage = "pairwise"
    trace_key = "pairwise"

    def __init__(self, scorer: PairScorer, top_k: int):
        self.scorer = scorer
        self.top_k = top_k

    def warm_up(self) -> None:
        self.scorer.warm_up()

    def rerank(self, queries: list[str], rankings: list[Ranking],
               text_of: Callable[[str], str]) -> list[Ranking]:
        triples: list[tuple[str, str, str]] = []
        spans: list[tuple[int, int, list[tuple[int, int]]]] = []
        for q, r in zip(queries, rankings):
            head = r.ids[:self.top_k]
            pairs = list(permutations(range(len(head)), 2))
            texts = [text_of(pid) for pid in head]
            spans.append((len(triples), len(head), pairs))
            triples += [(q, texts[i], texts[j]) for i, j in pairs]
        probs = self.scorer.prefer(triples) if triples else np.zeros(0)
        out = []
        for r, (lo, n, pairs) in zip(rankings, spans):
            s = sym_sum(n, pairs, probs[lo:lo + len(pairs)])
            order = sorted(range(n), key=lambda i: (-s[i], i))
            ids = [r.ids[i] for i in order] + list(r.ids[n:])
            floor = min((float(s[i]) for i in order), default=0.0)
            scores = [float(s[i]) for i in order] + [floor - 1.0 - t for t in range(len(r.ids) - n)]
            out.append(Ranking(ids=ids, scores=scores))
        return out
