"""``preqrag export``: a LiveRAG answer file (and its traces) → a TREC RAG 2024 or 2025 run.

For each line of ``answers.jsonl`` the trace in ``answers.traces.jsonl``
(:func:`preqrag.core.io.sidecar`) gives the ids of the context passages, in prompt order
(``Trace.context_ids``, aligned with the answer's ``passages``); they become the answer's
``references`` (``ids="document"``: their documents' ids instead, which are the track's
segment ids when the MS MARCO V2.1 segmented collection is indexed one segment per
document). The answer's sentences and their citations:

* generators that cite (CIR, GINGER: ``Trace.citations``) keep their own sentences and
  citations;
* for the others, the answer is split into sentences and each sentence is attributed to
  the context passages that support it (:mod:`preqrag.components.citations`).

Then, as the track requires (castorini/ragnarok ``src/ragnarok/scripts/rag24_validation.py``
and ``rag25_validation.py``; formats in :mod:`preqrag.trec.formats`): at most 20 (2024) or
100 (2025) references (cited passages are kept first), no citation twice in a sentence, at
most 400 words (sentences dropped from the end, the last one cut if it alone is longer,
as the checkers' fixers do), and for 2024 ``response_length`` = the words counted as the
checker counts them. Records are built field for field as ragnarok writes them: 2024 as
``src/ragnarok/data.py`` ``result_to_dict`` (``run_id``, ``topic_id``, ``topic``,
``references``, ``response_length``, ``answer``); 2025 as
``src/ragnarok/scripts/trec25_conversion.py`` ``convert_record`` (``metadata`` {``team_id``,
``run_id``, ``type``, ``narrative_id``, ``narrative``, ``prompt``}, ``references``,
``answer``; citations as indexes, the checker's format 1). Topic ids are written as strings,
as the topic files hold them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..core.io import atomic_write_text, iter_json_lines, read_jsonl_tolerant, sidecar
from ..core.records import LiveRAGAnswer, Trace, doc_of
from .formats import REFERENCE_LIMIT, RESPONSE_LIMIT, TREC_FORMATS, Rag24Answer, Rag25Answer, response_length
from .validate import Problem, model_problems


class ExportError(ValueError):
    """The answer file cannot be exported; ``problems`` name file, line and field."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems[:5]) + (f" (+{len(problems) - 5} more)"
                                                                     if len(problems) > 5 else ""))


@dataclass
class ExportSummary:
    """Counts of one export: answers written, how many kept the generator's citations and how
    many were attributed, sentences, citations, sentences citing nothing, and what was cut."""

    answers: int = 0
    generator_cited: int = 0
    attributed: int = 0
    sentences: int = 0
    citations: int = 0
    uncited_sentences: int = 0
    cut_sentences: int = 0
    dropped_references: int = 0
    records: list[dict] = field(default_factory=list, repr=False)

    def add(self, record: dict, sentences: list[tuple[str, list[int]]]) -> None:
        """Count one written record and its ``(sentence, citations)``."""
        self.answers += 1
        self.sentences += len(sentences)
        self.citations += sum(len(cs) for _, cs in sentences)
        self.uncited_sentences += sum(not cs for _, cs in sentences)
        self.records.append(record)


def _fit_words(sentences: list[tuple[str, list[int]]], limit: int) -> tuple[list[tuple[str, list[int]]], int]:
    """Sentences kept within ``limit`` words (:func:`response_length`): whole sentences while
    they fit, then the first one that does not is cut to the words left. Returns
    ``(kept, number of sentences dropped or cut)``."""
    kept, room, cut = [], limit, 0
    for text, cites in sentences:
        n = response_length([text])
        if n <= room:
            kept.append((text, cites))
            room -= n
            continue
        cut += 1
        if room > 0:
            kept.append((" ".join(text.split()[:room]), cites))
            room = 0
    return kept, cut


def _fit_references(refs: list[str], sentences: list[tuple[str, list[int]]], limit: int
                    ) -> tuple[list[str], list[tuple[str, list[int]]]]:
    """At most ``limit`` references: cited ones first (in reference order), then the others;
    citations re-indexed, and each sentence's citations de-duplicated (order kept)."""
    cited = sorted({c for _, cs in sentences for c in cs})
    keep = cited + [i for i in range(len(refs)) if i not in set(cited)]
    keep = sorted(keep[:limit])
    new = {old: i for i, old in enumerate(keep)}
    out = [(t, list(dict.fromkeys(new[c] for c in cs if c in new))) for t, cs in sentences]
    return [refs[i] for i in keep], out


def read_run(answers: str | Path) -> tuple[list[tuple[int, LiveRAGAnswer, Trace]], list[Problem]]:
    """The answers of a run with their traces: ``([(line, answer, trace)], problems)``.

    Problems (file, line, field) for lines that are not schema-valid LiveRAG answers, answers
    without a trace in the traces sidecar, and traces whose ``context_ids`` do not match the
    answer's ``passages``.

    Raises:
        FileNotFoundError: the answer file does not exist.
    """
    answers = Path(answers)
    traces_path = sidecar(answers, "traces")
    traces: dict[str, Trace] = {}
    for obj in read_jsonl_tolerant(traces_path):
        try:
            t = Trace.model_validate(obj)
        except ValidationError:
            continue
        traces[str(t.id)] = t  # the last trace of an id is the one its answer was written with
    out, problems = [], []
    for lineno, obj, bad in iter_json_lines(answers):
        if bad is not None:
            problems.append(Problem(str(answers), lineno, "<line>", bad))
            continue
        try:
            ans = LiveRAGAnswer.model_validate(obj)
        except ValidationError as e:
            problems += model_problems(str(answers), lineno, e)
            continue
        trace = traces.get(str(ans.id))
        if trace is None:
            problems.append(Problem(str(answers), lineno, "id", f"no trace for id {ans.id!r} in {traces_path}: "
                                    "the passage ids of its context are unknown"))
            continue
        if len(trace.context_ids) != len(ans.passages):
            problems.append(Problem(str(answers), lineno, "passages", f"{len(ans.passages)} passages but the trace in "
                                    f"{traces_path} has {len(trace.context_ids)} context ids"))
            continue
        out.append((lineno, ans, trace))
    return out, problems


def _as_documents(context_ids: list[str], sentences: list[tuple[str, list[int]]]
                  ) -> tuple[list[str], list[tuple[str, list[int]]]]:
    """References as document ids: each context passage ``<doc id>#<n>`` → ``<doc id>``
    (first occurrence order), citations mapped and de-duplicated."""
    docs: list[str] = []
    where: dict[str, int] = {}
    of_passage = []
    for pid in context_ids:
        doc = doc_of(pid)
        if doc not in where:
            where[doc] = len(docs)
            docs.append(doc)
        of_passage.append(where[doc])
    return docs, [(t, list(dict.fromkeys(of_passage[c] for c in cs))) for t, cs in sentences]


def _check_options(fmt: str, run_id: str, team_id: str | None, ids: str, run_type: str) -> None:
    """:func:`export_run`'s ValueErrors for its options."""
    if fmt not in TREC_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(TREC_FORMATS)}")
    if not run_id:
        raise ValueError("the run id must not be empty")
    if fmt == "trec-rag25" and not team_id:
        raise ValueError("trec-rag25 needs a team id (metadata.team_id): give --team-id")
    if ids not in ("passage", "document"):
        raise ValueError(f"ids must be 'passage' or 'document', not {ids!r}")
    if run_type not in ("automatic", "manual"):
        raise ValueError(f"run type must be 'automatic' or 'manual', not {run_type!r}")


def _record(fmt: str, ans: LiveRAGAnswer, refs: list[str], sents: list[tuple[str, list[int]]], run_id: str,
            team_id: str | None, run_type: str) -> dict:
    """One run record of ``fmt`` (validated against its model) for an answer's cited sentences."""
    answer = [{"text": t, "citations": cs} for t, cs in sents]
    if fmt == "trec-rag24":
        rec = {"run_id": run_id, "topic_id": str(ans.id), "topic": ans.question, "references": refs,
               "response_length": response_length([t for t, _ in sents]), "answer": answer}
        Rag24Answer.model_validate(rec)
        return rec
    rec = {"metadata": {"team_id": team_id, "run_id": run_id, "type": run_type, "narrative_id": str(ans.id),
                        "narrative": ans.question, "prompt": ans.final_prompt},
           "references": refs, "answer": answer}
    Rag25Answer.model_validate(rec)
    return rec


def export_run(answers: str | Path, output: str | Path, fmt: str, run_id: str, *, team_id: str | None = None,
               run_type: str = "automatic", ids: str = "passage",
               attributor: Callable[[], object] | None = None) -> ExportSummary:
    """Write a TREC RAG run from a LiveRAG answer file (see the module docstring).

    Args:
        answers: ``answers.jsonl`` written by ``preqrag run``; its ``answers.traces.jsonl`` must
            be beside it.
        output: the run file to write (atomically, :func:`preqrag.core.io.atomic_write_text`).
        fmt: ``trec-rag24`` or ``trec-rag25``.
        run_id: the run's id (``run_id``; ``metadata.run_id`` in 2025).
        team_id: ``metadata.team_id`` (required for ``trec-rag25``).
        run_type: ``metadata.type`` for 2025: ``automatic`` (default) or ``manual``.
        ids: what ``references`` hold: ``passage`` (default; the indexed passages,
            ``<doc id>#<n>``) or ``document`` (their documents' ids: with the track's MS MARCO
            V2.1 *segmented* collection indexed one segment per document, these are the
            segment ids the track expects).
        attributor: returns a :class:`preqrag.components.citations.Attributor`; called once, only when
            some answer's generator did not cite (default:
            :func:`preqrag.components.citations.load_attributor`).

    Returns:
        ExportSummary; every record written is schema-valid for ``fmt``.

    Raises:
        ExportError: bad answer lines or missing traces (nothing is written).
        ValueError: an unknown format, an empty run id, or no ``team_id`` for 2025.
        FileNotFoundError: the answer file does not exist.
    """
    _check_options(fmt, run_id, team_id, ids, run_type)
    rows, problems = read_run(answers)
    if problems:
        raise ExportError(problems)
    summary = ExportSummary()
    plans: list[tuple[LiveRAGAnswer, Trace, list[tuple[str, list[int]]] | None, list[str]]] = []
    to_attribute: list[tuple[list[str], list[str]]] = []
    for _, ans, trace in rows:
        if trace.citations:  # the generator cited
            pos = {pid: i for i, pid in enumerate(trace.context_ids)}
            sents = [(c.sentence, [pos[p] for p in c.passage_ids if p in pos]) for c in trace.citations
                     if c.sentence.strip()]
            plans.append((ans, trace, sents, []))
            summary.generator_cited += 1
        else:
            from ..components.citations import split_sentences

            texts = split_sentences(ans.answer)
            plans.append((ans, trace, None, texts))
            to_attribute.append((texts, [p.passage for p in ans.passages]))
            summary.attributed += 1
    attributed = []
    if any(texts for texts, _ in to_attribute):
        if attributor is None:
            from ..components.citations import load_attributor

            attributor = load_attributor
        attributed = attributor().attribute_many(to_attribute)
    else:
        attributed = [[[] for _ in texts] for texts, _ in to_attribute]
    it = iter(attributed)
    lines = []
    for ans, trace, sents, texts in plans:
        if sents is None:
            sents = list(zip(texts, next(it)))
        refs = list(trace.context_ids)
        if ids == "document":
            refs, sents = _as_documents(refs, sents)
        n_refs = len(refs)
        refs, sents = _fit_references(refs, sents, REFERENCE_LIMIT[fmt])
        summary.dropped_references += n_refs - len(refs)
        sents, cut = _fit_words(sents, RESPONSE_LIMIT)
        summary.cut_sentences += cut
        rec = _record(fmt, ans, refs, sents, run_id, team_id, run_type)
        summary.add(rec, sents)
        lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
    atomic_write_text(output, "".join(lines))
    return summary
