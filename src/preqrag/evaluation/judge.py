"""LLM-as-judge answer evaluation: the PreQRAG paper's three metrics and LiveRAG's two.

Metrics (name → scale, source):

* ``equivalence`` 0..2 vs the reference answer — PreQRAG §3.1 and Appendix C.1.
* ``relevance`` 0..2, the answer vs the question — PreQRAG §3.1 and Appendix C.1.
* ``faithfulness`` -1..1, the answer vs the passages given to the generator — PreQRAG §3.1
  and Appendix C.1.
* ``liverag_correctness`` -1..2 and ``liverag_faithfulness`` -1..1 — the scales of the SIGIR
  2025 LiveRAG Challenge evaluation guidelines (LiveRAG Challenge, "Evaluation Guidelines",
  huggingface.co/spaces/LiveRAG/Challenge, Operational_Instructions; also PreQRAG Table 5).
  The organisers' judge prompts are not public; ours state their scales verbatim. As in the
  challenge, only the first 300 words of an answer are judged.

The paper's prompts are copied word for word from Appendix C.1; the PDF text lost its line
breaks, which are restored where the layout (scale items, fields) shows them, and the
hyphenation of the extraction ("an-swer") is undone.

Aggregation (PreQRAG §3.1): "the individual scores were then summed across all questions for
each metric and divided by the maximum possible score" — ``normalised = sum / (n_valid *
scale_max)``; for -1..1 scales this can be negative. LiveRAG reports the mean score on its
own scale (PreQRAG Table 5), given as ``mean``.

Replies are parsed strictly: exactly one distinct value on a line ``<Label>: <integer>``
(e.g. ``^\\s*Equivalence:\\s*(-?\\d+)\\s*$``), within the scale. Anything else is recorded
``"unparsable"`` with the raw reply and a reason, never guessed, and excluded from the
scores (counted as ``n_unparsable``). A failed LLM call is recorded ``"error"`` and asked
again on the next run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.io import append_jsonl, read_jsonl_tolerant
from ..core.records import Question
from ..core.contracts import LLM, LLMError
from .retrieval import gold_type

EQUIVALENCE_PROMPT = """You are an assistant evaluating the equivalence of a generated answer compared to the gold answer. Equivalence measures semantic similarity, not surface similarity.
Use this scale:
2: Fully equivalent — expresses the same meaning.
1: Partially equivalent — some shared meaning, but incomplete or imprecise.
0: Not equivalent — meaning differs or is wrong.
Question: <question>
Gold Answer: <gold answer>
Generated Answer: <answer>
Return ONLY your evaluation like this:
Equivalence: <score>"""
"""PreQRAG Appendix C.1, "Equivalence Prompt" (verbatim)."""

RELEVANCE_PROMPT = """You are an assistant evaluating the relevance of a generated answer based on the question. Relevance is defined as how directly and completely the answer addresses the question, regardless of correctness.
Use this scale:
2: Fully relevant — directly answers the question.
1: Partially relevant — somewhat related, vague, or off-topic parts.
0: Not relevant — does not answer or is unrelated.
Question: <question>
Generated Answer: <answer>
Return ONLY your evaluation like this:
Relevance: <score>"""
"""PreQRAG Appendix C.1, "Relevance Prompt" (verbatim)."""

FAITHFULNESS_PROMPT = """You are an assistant evaluating the faithfulness of a generated answer based on the given context and question. Faithfulness assesses whether the response is grounded in the retrieved passages.
Use this scale:
1: Full support. All answer parts are grounded.
0: Partial support. Some parts are grounded, others are not.
-1: No support. All answer parts are unsupported by the context.
Context: <context>
Question: <question>
Generated Answer: <answer>
Return ONLY your evaluation like this:
Faithfulness: <score>"""
"""PreQRAG Appendix C.1, "Faithfulness Prompt" (verbatim)."""

LIVERAG_CORRECTNESS_PROMPT = """You are an assistant evaluating the correctness of a generated answer to a question, following the evaluation guidelines of the SIGIR 2025 LiveRAG Challenge. Correctness combines coverage (the portion of the vital information in the gold answer that is covered by the generated answer) and relevance (the portion of the generated answer that directly addresses the question, regardless of its factual correctness).
Use this scale:
2: Correct and relevant (no irrelevant information).
1: Correct but contains irrelevant information.
0: No answer provided (abstention).
-1: Incorrect answer.
Question: <question>
Gold Answer: <gold answer>
Generated Answer: <answer>
Return ONLY your evaluation like this:
Correctness: <score>"""
"""Our prompt for the LiveRAG Challenge correctness scale (-1..2); the scale text is the
challenge's Evaluation Guidelines §1.1."""

LIVERAG_FAITHFULNESS_PROMPT = """You are an assistant evaluating the faithfulness of a generated answer, following the evaluation guidelines of the SIGIR 2025 LiveRAG Challenge. Faithfulness assesses whether the response is grounded in the retrieved passages.
Use this scale:
1: Full support. All answer parts are grounded.
0: Partial support. Not all answer parts are grounded.
-1: No support. All answer parts are not grounded.
Passages: <context>
Question: <question>
Generated Answer: <answer>
Return ONLY your evaluation like this:
Faithfulness: <score>"""
"""Our prompt for the LiveRAG Challenge faithfulness scale (-1..1); the scale text is the
challenge's Evaluation Guidelines §1.2."""


@dataclass(frozen=True)
class JudgeMetric:
    """One judged metric.

    Attributes:
        name: key in judgments and reports.
        label: the word before the colon in the expected reply (``"Equivalence"``).
        lo, hi: the integer scale.
        template: prompt with ``<question>``, ``<answer>``, ``<gold answer>``, ``<context>``.
        needs_reference: skipped for questions without a reference answer.
        max_answer_words: answer truncated to this many words (LiveRAG: 300), or None.
        source: where the prompt/scale comes from.
    """

    name: str
    label: str
    lo: int
    hi: int
    template: str
    needs_reference: bool
    max_answer_words: int | None
    source: str


METRICS: dict[str, JudgeMetric] = {m.name: m for m in (
    JudgeMetric("equivalence", "Equivalence", 0, 2, EQUIVALENCE_PROMPT, True, None,
                "PreQRAG Appendix C.1 / §3.1"),
    JudgeMetric("relevance", "Relevance", 0, 2, RELEVANCE_PROMPT, False, None,
                "PreQRAG Appendix C.1 / §3.1"),
    JudgeMetric("faithfulness", "Faithfulness", -1, 1, FAITHFULNESS_PROMPT, False, None,
                "PreQRAG Appendix C.1 / §3.1"),
    JudgeMetric("liverag_correctness", "Correctness", -1, 2, LIVERAG_CORRECTNESS_PROMPT, True, 300,
                "LiveRAG Challenge Evaluation Guidelines §1.1"),
    JudgeMetric("liverag_faithfulness", "Faithfulness", -1, 1, LIVERAG_FAITHFULNESS_PROMPT, False, 300,
                "LiveRAG Challenge Evaluation Guidelines §1.2"),
)}
"""All judge metrics, by name, in report order."""

DEFAULT_MAX_TOKENS = 64
"""Reply budget: the expected reply is one short line; 64 tokens leave room for a model that
adds a sentence before it, without paying for long essays."""

DEFAULT_BATCH_SIZE = 16
"""Requests per ``chat_many`` call; judgments are appended to the file after each batch."""

_PLACEHOLDER = re.compile(r"<question>|<gold answer>|<answer>|<context>")


def judge_is_meaningless(model_name: str | None) -> bool:
    """True when the judge is the bundled 135M SmolLM2, whose scores carry no information."""
    return bool(model_name) and "smollm2-135m" in str(model_name).lower()


def render_prompt(metric: JudgeMetric, *, question: str, answer: str, reference: str | None = None,
                  passages: Sequence[str] = ()) -> str:
    """Fill a metric's template in one pass (text inside the values is never re-substituted).

    ``passages`` are joined with blank lines as the context; the answer is cut to
    ``metric.max_answer_words`` words when set.
    """
    if metric.max_answer_words is not None:
        words = answer.split()
        if len(words) > metric.max_answer_words:
            answer = " ".join(words[: metric.max_answer_words])
    values = {"<question>": question, "<answer>": answer, "<gold answer>": reference or "",
              "<context>": "\n\n".join(passages)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(0)], metric.template)


def parse_score(reply: str, metric: JudgeMetric) -> tuple[str, int | None, str | None]:
    """Parse a judge reply strictly.

    Returns:
        ``("ok", score, None)`` when the reply has lines ``<Label>: <integer>`` (label
        case-insensitive, surrounding whitespace allowed, nothing else on the line) that all
        give the same value, within ``[metric.lo, metric.hi]``; otherwise
        ``("unparsable", None, reason)`` with reason ``"no score line"``,
        ``"conflicting scores [..]"`` or ``"out of range: v not in [lo, hi]"``.
    """
    pattern = re.compile(rf"^\s*{re.escape(metric.label)}:\s*(-?\d+)\s*$", re.MULTILINE | re.IGNORECASE)
    values = sorted({int(v) for v in pattern.findall(reply or "")})
    if not values:
        return "unparsable", None, "no score line"
    if len(values) > 1:
        return "unparsable", None, f"conflicting scores {values}"
    v = values[0]
    if not metric.lo <= v <= metric.hi:
        return "unparsable", None, f"out of range: {v} not in [{metric.lo}, {metric.hi}]"
    return "ok", v, None


def load_judgments(path: str | Path) -> list[dict]:
    """Read a judgments JSONL file (missing file → ``[]``; a torn last line is dropped and
    the file repaired so that appends can follow)."""
    return read_jsonl_tolerant(path, repair=True)


def _key(rec: Mapping[str, Any]) -> tuple[str, str, str]:
    return str(rec["id"]), str(rec["metric"]), str(rec.get("judge", ""))


def judge_answers(answers: Sequence[Mapping[str, Any]], questions: Sequence[Question], llm: LLM,
                  path: str | Path, *, metrics: Iterable[str] = tuple(METRICS),
                  limit: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                  max_tokens: int = DEFAULT_MAX_TOKENS,
                  progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Judge answers with ``llm``, appending each judgment to ``path`` as it is made.

    Args:
        answers: LiveRAG answer lines (``id``, ``question``, ``passages`` [{``passage``}],
            ``answer``), in the order to judge.
        questions: the question file; its ``answer`` field is the reference answer.
        llm: any :class:`~preqrag.core.contracts.LLM` (``preqrag.models.llm.load_llm``).
        path: judgments JSONL. Pairs ``(id, metric)`` already judged there by the same judge
            (``llm.name``) with status ``ok`` or ``unparsable`` are skipped (resume);
            ``error`` ones are asked again.
        metrics: metric names of :data:`METRICS` (default: all five).
        limit: judge only the first ``limit`` answers (default all).
        batch_size: requests per ``llm.chat_many`` call.
        max_tokens: reply budget per request.
        progress: called as ``progress(done, total)`` after each batch.

    Returns:
        The latest judgment of this judge for every ``(id, metric)`` of the selected answers:
        ``{"id", "metric", "judge", "status": "ok"|"unparsable"|"error", "score": int|None,
        "reason": str|None, "raw": str|None}``. Metrics needing a reference answer are
        skipped for questions without one.

    Raises:
        KeyError: an unknown metric name.
    """
    specs = [METRICS[m] for m in metrics]
    judge = getattr(llm, "name", "") or ""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    latest: dict[tuple[str, str, str], dict] = {_key(r): r for r in load_judgments(path)
                                                if {"id", "metric"} <= r.keys()}
    qmap = {q.key: q for q in questions}
    selected = list(answers)[: limit if limit is not None else None]

    todo: list[tuple[dict, list[dict]]] = []
    wanted: list[tuple[str, str, str]] = []
    for a in selected:
        qid = str(a["id"])
        q = qmap.get(qid)
        reference = q.extra.get("answer") if q is not None else None
        question = a.get("question") or (q.question if q is not None else "")
        passages = [p.get("passage", "") for p in a.get("passages") or [] if isinstance(p, dict)]
        for spec in specs:
            if spec.needs_reference and not (isinstance(reference, str) and reference.strip()):
                continue
            key = (qid, spec.name, judge)
            wanted.append(key)
            prev = latest.get(key)
            if prev is not None and prev.get("status") in ("ok", "unparsable"):
                continue
            prompt = render_prompt(spec, question=question, answer=str(a.get("answer") or ""),
                                   reference=reference, passages=passages)
            todo.append(({"id": qid, "metric": spec.name, "judge": judge},
                         [{"role": "user", "content": prompt}]))

    for start in range(0, len(todo), batch_size):
        batch = todo[start: start + batch_size]
        replies = llm.chat_many([m for _, m in batch], max_tokens=max_tokens, temperature=0.0)
        records = []
        for (base, _), reply in zip(batch, replies):
            spec = METRICS[base["metric"]]
            if isinstance(reply, LLMError):
                rec = {**base, "status": "error", "score": None, "reason": str(reply), "raw": None}
            else:
                status, score, reason = parse_score(reply, spec)
                rec = {**base, "status": status, "score": score, "reason": reason, "raw": reply}
            records.append(rec)
            latest[_key(rec)] = rec
        append_jsonl(path, records)
        if progress is not None:
            progress(min(start + batch_size, len(todo)), len(todo))
    return [latest[k] for k in wanted if k in latest]


def _summary_block(recs: list[dict], spec: JudgeMetric) -> dict:
    valid = [r["score"] for r in recs if r.get("status") == "ok" and r.get("score") is not None]
    total = float(sum(valid))
    n = len(valid)
    return {
        "n_judged": len(recs),
        "n_valid": n,
        "n_unparsable": sum(1 for r in recs if r.get("status") == "unparsable"),
        "n_error": sum(1 for r in recs if r.get("status") == "error"),
        "sum": total,
        "max_possible": n * spec.hi,
        "normalised": total / (n * spec.hi) if n else None,
        "mean": total / n if n else None,
        "scale": [spec.lo, spec.hi],
    }


def summarise_judgments(judgments: Sequence[Mapping[str, Any]], questions: Sequence[Question],
                        metrics: Iterable[str] = tuple(METRICS)) -> dict:
    """Aggregate judgments per metric, overall and by gold question type.

    Returns:
        ``{metric: {"all" | "single" | "multi": {"n_judged", "n_valid", "n_unparsable",
        "n_error", "sum", "max_possible", "normalised", "mean", "scale"}, "source": str}}``.
        ``normalised`` is the paper's figure (sum / maximum possible, PreQRAG §3.1), ``mean``
        LiveRAG's (Table 5); both ``None`` when no judgment parsed. Unparsable and failed
        judgments are excluded from both and counted.
    """
    qtype = {q.key: gold_type(q) for q in questions}
    out: dict[str, Any] = {}
    for name in metrics:
        spec = METRICS[name]
        recs = [dict(r) for r in judgments if r.get("metric") == name]
        out[name] = {
            "all": _summary_block(recs, spec),
            "single": _summary_block([r for r in recs if qtype.get(str(r["id"])) == "single"], spec),
            "multi": _summary_block([r for r in recs if qtype.get(str(r["id"])) == "multi"], spec),
            "source": spec.source,
        }
    return out
