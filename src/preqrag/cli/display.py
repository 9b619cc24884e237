"""An answer as a person reads it in a terminal (``preqrag demo``, ``preqrag ask``): the answer
with ``[n]`` markers on the sentences a context passage supports, the distinct documents those
numbers stand for, and the seconds it took.

Markers: an answer that already cites (CIR's ``[n]`` markers) is shown as written; otherwise each
sentence is attributed to the passages that support it by the calibrated cross-encoder of
:mod:`preqrag.components.citations` (the TREC export's attribution), and the markers are added after it.
Documents: passage numbers grouped by document, each document once (``[1,3] <urn:a>``), cited
ones first; a document none of the answer's sentences rests on is listed as "also in the
prompt".
"""

from __future__ import annotations

from ..components.citations import marker_citations, split_sentences


def cited_answer(answer: str, passages: list[str], attributor) -> tuple[str, set[int]]:
    """``(text with [n] markers, cited 1-based numbers)``. An answer with markers is returned
    as it is; ``attributor`` (:class:`preqrag.components.citations.Attributor`, or ``None`` for no
    attribution) marks the others."""
    own = marker_citations(answer, len(passages))
    if own:
        return answer, {n for _, nums in own for n in nums}
    if attributor is None or not passages:
        return answer, set()
    sentences = split_sentences(answer)
    cites = attributor.attribute(sentences, passages) if sentences else []
    parts, cited = [], set()
    for s, idx in zip(sentences, cites):
        nums = sorted(i + 1 for i in idx)
        cited.update(nums)
        parts.append(s + (" [" + ", ".join(map(str, nums)) + "]" if nums else ""))
    return " ".join(parts), cited


def answer_time(trace: dict) -> tuple[float, int]:
    """``(seconds, batch size)`` of an answer from its trace (``Trace`` as JSON): the wall
    seconds from the start of its batch to its answer (the batch seconds of its stages summed:
    stages of a batch run one after another) and the most questions a stage shared them with.
    A trace without ``batches`` gives its stage seconds summed and 1."""
    batches = trace.get("batches") or {}
    if not batches:
        return sum((trace.get("seconds") or {}).values()), 1
    return sum(b["seconds"] for b in batches.values()), max(b["size"] for b in batches.values())


def format_answer(record: dict, seconds: float | None = None, attributor=None, batch_size: int = 1) -> str:
    """The lines shown for one LiveRAG answer record (``question``, ``answer``, ``passages``
    with ``passage`` and ``doc_IDs``): ``Q:``, ``A:`` with markers (:func:`cited_answer`; the
    answer on one line, its white space collapsed, whether or not it cited itself),
    the documents by passage number, and ``seconds`` when given: the answer's own wall time
    (:func:`answer_time`); with ``batch_size`` > 1 the line says how many questions were answered
    together in that time, and the per-question share."""
    passages = record.get("passages") or []
    text, cited = cited_answer(record["answer"], [p["passage"] for p in passages], attributor)
    docs: dict[str, list[int]] = {}
    for n, p in enumerate(passages, 1):
        for d in p["doc_IDs"]:
            docs.setdefault(d, []).append(n)
    used = [(d, ns) for d, ns in docs.items() if cited & set(ns)]
    rest = [(d, ns) for d, ns in docs.items() if not cited & set(ns)]
    lines = [f"Q: {record['question']}", f"A: {' '.join(text.split())}"]  # one line, as attributed answers are

    def fmt(items):
        return "; ".join(f"[{','.join(map(str, ns))}] {d}" for d, ns in items)

    if used:
        lines.append(f"   sources: {fmt(used)}")
        if rest:
            lines.append(f"   also in the prompt: {fmt(rest)}")
    elif rest:
        lines.append(f"   passages from: {fmt(rest)}")
    if seconds is not None and batch_size > 1:
        lines.append(f"   {seconds:.1f} s, answered together with {batch_size - 1} other question"
                     f"{'s' if batch_size > 2 else ''} ({seconds / batch_size:.1f} s per question)")
    elif seconds is not None:
        lines.append(f"   {seconds:.1f} s")
    return "\n".join(lines) + "\n"
