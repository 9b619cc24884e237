"""CIR's generation step: expertise-adapted prompts and a cited JSON answer (CIR at TREC 2024 RAG, §2.2).

The prompt is CIR's base prompt (Table 2) with one of the expertise prompts P.0–P.3
inserted (Table 2): P.0 no specific user, P.1 a beginner, P.2 an expert, P.3 a user with
some foundational knowledge. The LLM answers with a JSON list of sentences, each carrying
the ids of the passages it draws on; the reply is parsed strictly and citations to ids that
were not in the input are counted and removed (§2.2: "hallucinated references that are not
part of the input are counted and removed from the final RAG output").

Placement of P.x (Table 2 and its caption): the base prompt's text has two slots where a bold
part (lost in the paper's text extraction) is inserted: ``"Do retrieval augmented generation
with the following texts\\n" + [ ] + "according to the following query: " + QUERY + ... +
"\\ngive the output as a json, ... where the information appears\\n" + [ ]``, and the caption
lists the parts as "the general prompt, [ ], query presentation and query, prompt details, text
introduction and segments, the output method and [ ]", naming one bold part to replace besides
QUERY and SEGMENTS: "For [ ] either P.0, P.1, P.2 or P.3 can be inserted". Both slots are read
as that part, so the expertise sentence is given twice: after the general prompt and again
after the output method, at the end of the prompt (after the segments, where a long context
cannot bury it). P.0 is the empty string (both slots empty). :data:`OUTPUT_FORMAT`, not in the
paper, follows the paper's prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...components.answering import answer_options, copied_sentences, degenerate
from ...core.config import GeneratorConfig
from ...components.generation import Generated, fit_prompt, truncate_words
from ...models.llm.structured import CHARS_PER_TOKEN, chars_for, chat_grouped
from ...components.selection import select_batch
from ...core.contracts import LLM, LLMError
from ...core.text import split_sentences, word_support
from .settings import CIRConfig


def _key(sentence: str) -> str:
    """A sentence's repeat key: lower-case letters and digits, single-spaced."""
    return " ".join(re.findall(r"[a-z0-9]+", sentence.lower()))


# CIR Table 2, verbatim (including the paper's spelling "seperate").
BASE_GENERAL = "Do retrieval augmented generation with the following texts\n"
BASE_QUERY = "according to the following query: "
BASE_DETAILS = ("make short and concise sentences while combining multiple texts into one sentence if they "
                "convey the same information\n")
BASE_TEXTS = "these are the texts, ordered by relevance with their ids:\n"
BASE_OUTPUT = ("\ngive the output as a json, where all sentences are seperate and are assigned the ids of the "
               "texts, where the information appears\n")

EXPERTISE_PROMPTS: dict[str, str] = {
    "P.0": "",
    "P.1": "Please bear in mind that I am a beginner in this field and have little prior knowledge.\n",
    "P.2": "Please bear in mind that I am an expert in this field and have substantial prior knowledge.\n",
    "P.3": "Please bear in mind that I have some foundational knowledge in this field but am not deeply "
           "experienced.\n",
}
"""CIR Table 2, verbatim: the user-context sentence inserted into the base prompt."""

EXPERTISE_LEVELS: dict[str, str] = {
    "none": "P.0", "unknown": "P.0", "general": "P.0",
    "novice": "P.1", "beginner": "P.1", "layperson": "P.1", "lay": "P.1",
    "expert": "P.2", "advanced": "P.2",
    "intermediate": "P.3", "some": "P.3", "foundational": "P.3",
}
"""A question's ``user_expertise`` value (lower-cased) → prompt. DataMorgana, which made the
LiveRAG questions, uses ``novice`` / ``expert``; the other names are for other data sets.
The prompt ids themselves (``"P.2"``) are accepted too."""

OUTPUT_FORMAT = ('Reply with this JSON only: {"sentences": [{"text": "<one sentence of your answer to the query, '
                 'in your own words>", "ids": [<id>, ...]}, ...]}\n')
"""Not in the paper: the JSON shape the parser reads, asking for the answer's own sentences (a
1.5B model otherwise copies segment text into the sentence slots). CIR gave few-shot examples
and asked for JSON in the API call (§2.2) but published neither the examples nor the schema."""

REWRITE_PROMPT = ("Query: {question}\n"
                  "Draft answer, as JSON sentences with the ids of the texts they come from:\n{draft}\n"
                  "Some draft sentences copy their texts word for word. Write the answer to the query again in your "
                  "own words, keeping every fact of the draft that answers the query (names, numbers, causes, "
                  "steps), each sentence with the ids of its draft sentences' texts. Leave out what does not "
                  "answer the query.\n" + OUTPUT_FORMAT)
"""Not in the paper: the follow-up turn for an answer with verbatim copies (``[cir] rewrite_copies``;
a sentence holding :data:`preqrag.components.answering.COPY_WORDS` consecutive words of a segment). It sees
only the question and the draft (short: the segments are not sent again), so it costs a fraction
of the first call's prefill; the reply has the first call's schema, so its ids are checked the same
way. It asks to keep the draft's facts (names, numbers, causes, steps): asked only for "short
sentences ... that answer the query directly", the 1.5B default LLM turned specific drafts into vague
ones ("HIV causes cell death and infection stages."); keeping the facts raised token F1 0.289 -> 0.302
and answer length 39 -> 52 words on the first 48 dev questions (docs/preset-cir.md)."""

TEXT_OUTPUT = ("\ngive the output as separate sentences, each followed by the ids of the texts where the "
               "information appears, in brackets\n")
"""``[cir] answer_format = "text"``: Table 2's output method ("give the output as a json, where all
sentences are seperate and are assigned the ids of the texts, where the information appears") with
the JSON replaced by bracketed ids after each sentence; not in the paper."""

TEXT_FORMAT = ("Answer in 2-3 sentences in your own words, each ending with the ids of its texts in brackets, "
               "for example: The tower is 330 metres tall [1][3].\n")
"""``answer_format = "text"``: the shape :func:`parse_cir_text` reads (cf. :data:`OUTPUT_FORMAT`)."""

TEXT_REWRITE_PROMPT = ("Query: {question}\n"
                       "Draft answer, with the ids of the texts each sentence comes from:\n{draft}\n"
                       "Some draft sentences copy their texts word for word. Write the answer to the query "
                       "again: short sentences in your own words that answer the query directly. Leave out what "
                       "does not answer the query.\n" + TEXT_FORMAT)
"""``answer_format = "text"``: the rewrite turn for bracketed-id answers. It keeps the earlier wording
(short sentences that answer the query directly), not :data:`REWRITE_PROMPT`'s "keeping every fact of the
draft": the fact-keeping wording was measured only with JSON answers (docs/preset-cir.md)."""

PARAPHRASE_PROMPT = ("Rewrite this sentence in your own words. Keep its facts and add nothing. Reply with the "
                     "rewritten sentence only.\nSentence: {sentence}")
"""Not in the paper: the per-sentence turn for an answer sentence that still copies 12+ consecutive
words of a segment after :data:`REWRITE_PROMPT` (``[cir] paraphrase_copies``). One short call per
such sentence (~60 prompt and ~35 reply tokens), all in one batched call; the sentence keeps its
citations."""

PARAPHRASE_MAX_TOKENS = 96
"""Reply budget of a paraphrase: one sentence of at most :data:`MAX_SENTENCE_CHARS` characters."""

PARAPHRASE_MIN_SUPPORT = 0.5
"""Share of a paraphrase's content words (stems) that must occur in the sentence it rewrites, as
GINGER's summaries (preqrag.systems.ginger.generator.SUMMARY_MIN_SUPPORT): a paraphrase keeps most
words; one that does not has changed what the sentence says, and the sentence is kept."""
_PARAPHRASE_LABEL = re.compile(r"^\s*(?:rewritten sentence|sentence)\s*:\s*", re.I)

_CITES = re.compile(r"((?:\s*\[\s*\d+(?:\s*,\s*\d+)*\s*\])+)")
_LEAD = re.compile(r"^[\s.,;:!?]+")
_ANSWER_PREFIX = re.compile(r"^\s*(?:answer|response)\s*:\s*", re.I)

MAX_SENTENCE_CHARS = 300
"""Longest answer sentence in characters (the schema's ``maxLength``)."""


def _fill(template: str, **values: str) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]`` in one pass (the JSON braces of
    :data:`OUTPUT_FORMAT` stay; a value holding ``{draft}`` is not filled again)."""
    return re.sub(r"\{(" + "|".join(values) + r")\}", lambda m: values[m.group(1)], template)


def cir_answer_schema(n_passages: int, max_new_tokens: int, min_sentences: int = 1,
                      max_sentences: int | None = None) -> dict:
    """The reply schema of a CIR answer (:data:`OUTPUT_FORMAT`): ``{"sentences": [{"text": str,
    "ids": [id, ...]}]}`` where an id is one of the passage numbers 1..``n_passages`` (an
    ``enum``, so a constrained reply cannot cite a passage that is not in the input), each
    sentence 1..:data:`MAX_SENTENCE_CHARS` characters citing 0..3 passages, at least
    ``min_sentences`` sentences (``[cir] min_sentences``, capped at the most) and at most
    ``max_sentences`` (``[cir] max_sentences``; None: no cap of its own) and as many sentences as fit
    ``max_new_tokens`` at one character per token
    (:data:`~preqrag.models.llm.structured.CHARS_PER_TOKEN`; a budget too small for one gets a shorter
    sentence), so the reply closes before its budget ends.

    Raises:
        ValueError: ``n_passages < 1``.
    """
    if n_passages < 1:
        raise ValueError("a CIR answer schema needs at least one passage")
    per_sentence = int(MAX_SENTENCE_CHARS / CHARS_PER_TOKEN) + 24  # the text, its ids, the JSON around
    max_sentences = max(1, min(12, max_sentences or 12, (max_new_tokens - 16) // per_sentence))
    # a budget too small for one full sentence: a shorter sentence
    max_chars = MAX_SENTENCE_CHARS if max_new_tokens - 16 >= per_sentence else chars_for(max_new_tokens, 200, 40)
    ids = {"type": "array", "items": {"type": "integer", "enum": list(range(1, n_passages + 1))},
           "minItems": 0, "maxItems": min(3, n_passages)}
    sentence = {"type": "object",
                "properties": {"text": {"type": "string", "minLength": 1, "maxLength": max_chars},
                               "ids": ids},
                "required": ["text", "ids"], "additionalProperties": False}
    return {"type": "object",
            "properties": {"sentences": {"type": "array", "items": sentence,
                                         "minItems": max(1, min(min_sentences, max_sentences)),
                                         "maxItems": max_sentences}},
            "required": ["sentences"], "additionalProperties": False}


SENTENCE_KEYS = ("sentences", "answer", "response")
"""Top-level keys under which a JSON object may hold the sentence list (else a bare list)."""
TEXT_KEYS = ("text", "sentence")
IDS_KEYS = ("ids", "citations", "references")

_ID = re.compile(r"^\s*\[?\s*(\d+)\s*\]?\s*$")
_FENCE = re.compile(r"^\s*```[A-Za-z]*\s*\n?(.*?)\n?\s*```\s*$", re.S)


def segments_dict(passages: Sequence[str]) -> str:
    """CIR's SEGMENTS (Table 2): "Python dictionary-formatted pairs of segment IDs and segment
    texts". The ids are the passages' 1-based numbers (CIR used TREC segment ids; the
    LiveRAG passage ids are long URNs that a small LLM cannot copy reliably)."""
    return repr({i: p.strip() for i, p in enumerate(passages, 1)})


def build_cir_prompt(question: str, passages: Sequence[str], expertise: str = "P.0", answer_format: str = "json") -> str:
    """CIR's generation prompt (Table 2) for ``question`` and its context ``passages``
    (importance order), with expertise prompt ``expertise`` (``"P.0"`` … ``"P.3"``) in both
    of Table 2's slots (after the general prompt and after the output method; see the module
    docstring), followed by :data:`OUTPUT_FORMAT`; ``answer_format = "text"``: the output method
    :data:`TEXT_OUTPUT` and :data:`TEXT_FORMAT` instead (bracketed ids after each sentence).

    Raises:
        KeyError: an unknown expertise prompt id.
    """
    user = EXPERTISE_PROMPTS[expertise]
    output, shape = (TEXT_OUTPUT, TEXT_FORMAT) if answer_format == "text" else (BASE_OUTPUT, OUTPUT_FORMAT)
    return (BASE_GENERAL + user + BASE_QUERY + question + "\n" + BASE_DETAILS
            + BASE_TEXTS + segments_dict(passages) + output + user + shape)


@dataclass
class ParsedAnswer:
    """The parse of one LLM reply (:func:`parse_cir_answer`).

    ``sentences``: (sentence, cited 1-based passage numbers) in answer order;
    ``removed``: citations to ids not in the input (out of range, or not an id at all);
    ``fallback``: why the reply could not be used as JSON (then ``sentences`` is empty and
    the caller uses the raw text); ``skipped``: list items that were not a sentence object.
    """

    sentences: list[tuple[str, list[int]]] = field(default_factory=list)
    removed: int = 0
    fallback: str | None = None
    skipped: int = 0
    cut: bool = False
    """The reply was cut inside its sentence list (at the token budget); its complete sentences
    were kept."""


def _json_value(reply: str) -> Any:
    """The first JSON value in ``reply`` (a ```json fence is unwrapped; text before the first
    ``{``/``[`` and after the value is ignored). Raises ValueError if there is none."""
    text = reply.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError("no JSON object in the reply")
    try:
        value, _ = json.JSONDecoder().raw_decode(text, min(starts))
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON ({e.msg} at char {e.pos})") from None
    return value


def _first(obj: dict, keys: tuple[str, ...]) -> Any:
    for k in keys:
        if k in obj:
            return obj[k]
    return None


def parse_cir_answer(reply: str, n_passages: int) -> ParsedAnswer:
    """Parse a CIR JSON answer strictly; never raises.

    Accepted shapes (:data:`OUTPUT_FORMAT` and close variants a capable model produces):
    ``{"sentences": [...]}`` (or under ``answer`` / ``response``) or a bare list, whose items
    are objects with the sentence under ``text`` / ``sentence`` (a non-empty string) and the
    ids under ``ids`` / ``citations`` / ``references`` (a list, or one id). An id is an
    integer or a string of digits (``"2"``, ``"[2]"``); it is kept when it names an input
    passage (1 … ``n_passages``), else counted in ``removed`` and dropped (CIR §2.2).
    Repeated ids in one sentence are kept once. Items that are not such objects are
    skipped (counted in ``skipped``).

    Returns:
        A :class:`ParsedAnswer`; ``fallback`` names the reason when no sentence could be
        read (no JSON, invalid JSON, wrong shape, no sentence).
    """
    cut = False
    try:
        value = _json_value(reply)
    except ValueError as e:
        value = _complete_prefix(reply)
        if value is None:
            return ParsedAnswer(fallback=f"unparsable JSON: {e}")
        cut = True
    items = _first(value, SENTENCE_KEYS) if isinstance(value, dict) else value
    if isinstance(value, dict) and items is None and _first(value, TEXT_KEYS) is not None:
        items = [value]  # a one-sentence answer given as a bare sentence object
    if not isinstance(items, list):
        return ParsedAnswer(fallback="unparsable JSON: no sentence list")
    out = ParsedAnswer()
    for item in items:
        text = _first(item, TEXT_KEYS) if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            out.skipped += 1
            continue
        raw = _first(item, IDS_KEYS)
        raw = [] if raw is None else raw if isinstance(raw, list) else [raw]
        nums: list[int] = []
        for x in raw:
            n = None
            if isinstance(x, int) and not isinstance(x, bool):
                n = x
            elif isinstance(x, str) and (m := _ID.match(x)):
                n = int(m.group(1))
            if n is None or not 1 <= n <= n_passages:
                out.removed += 1
            elif n not in nums:
                nums.append(n)
        out.sentences.append((" ".join(text.split()), nums))
    if not out.sentences:
        return ParsedAnswer(removed=out.removed, skipped=out.skipped,
                            fallback="unparsable JSON: no sentence with text")
    out.cut = cut
    return out


def _complete_prefix(reply: str) -> Any:
    """The ``{"sentences": [...]}`` object of a reply cut inside its list (at the token budget):
    the longest prefix ending at a sentence object's ``}`` that closes with ``]}`` into JSON
    holding at least one sentence, else None."""
    end = len(reply)
    while (end := reply.rfind("}", 0, end)) > 0:
        try:
            value = json.loads(reply[:end + 1] + "]}")
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and isinstance(value.get("sentences"), list) and value["sentences"]:
            return value
    return None


def parse_cir_text(reply: str, n_passages: int) -> ParsedAnswer:
    """Parse a bracketed-id answer (``[cir] answer_format = "text"``, :data:`TEXT_FORMAT`);
    never raises. The reply is cut at its citation groups (``[1]``, ``[1][3]``, ``[1, 3]``): the
    text before a group is one answer item citing that group's ids (several sentences may share
    one group, as one JSON item may hold several); text after the last group is an item citing
    nothing. Ids outside 1 … ``n_passages`` are counted in ``removed`` and dropped (CIR §2.2), a
    repeated id is kept once, punctuation left before an item's text after a group (``"… [1]. Next"``)
    is moved to the item it ends.

    Returns:
        A :class:`ParsedAnswer`; ``fallback`` is ``"no sentence"`` for a reply without letters or
        digits.
    """
    parts = _CITES.split(_ANSWER_PREFIX.sub("", reply.strip()))
    out = ParsedAnswer()
    for k in range(0, len(parts), 2):
        text = parts[k]
        lead = _LEAD.match(text)
        if lead and out.sentences:  # "... [1]. Next": the full stop ends the cited item
            stop = lead.group(0).strip()
            prev, ids = out.sentences[-1]
            if stop and not prev.endswith(tuple(".!?")):
                out.sentences[-1] = (prev + stop[0], ids)
        text = " ".join(_LEAD.sub("", text).split())
        if not re.search(r"[A-Za-z0-9]", text):
            continue
        nums: list[int] = []
        for x in re.findall(r"\d+", parts[k + 1]) if k + 1 < len(parts) else []:
            n = int(x)
            if not 1 <= n <= n_passages:
                out.removed += 1
            elif n not in nums:
                nums.append(n)
        out.sentences.append((text, nums))
    if not out.sentences:
        return ParsedAnswer(removed=out.removed, fallback="no sentence")
    return out


def text_draft(sentences: list[tuple[str, list[int]]]) -> str:
    """Sentences with their ids in brackets, the shape of :data:`TEXT_FORMAT`."""
    return " ".join(f"{t.rstrip('.')} {''.join(f'[{n}]' for n in ids)}.".replace(" .", ".") for t, ids in sentences)


def drop_repeats(sentences: list[tuple[str, list[int]]]) -> list[tuple[str, list[int]]]:
    """The answer's sentences, each said once: an item's text is split into sentences
    (:func:`preqrag.core.text.split_sentences`; one JSON item may hold several) and a sentence already
    said (same letters and digits, :func:`_key`) is dropped; an item left empty is dropped with
    its citations."""
    seen: set[str] = set()
    out = []
    for text, ids in sentences:
        parts = [x for x in (split_sentences(text) or [text]) if not (_key(x) in seen or seen.add(_key(x)))]
        if parts:
            out.append((" ".join(parts), ids))
    return out


def join_sentences(sentences: list[tuple[str, list[int]]], max_words: int) -> tuple[str, list[tuple[str, list[int]]]]:
    """The answer text (sentences joined by spaces) cut to ``max_words`` words, and the
    citations of the sentences that are (wholly or partly, then cut) in it."""
    kept: list[tuple[str, list[int]]] = []
    room = max_words
    for text, nums in sentences:
        if room <= 0:
            break
        words = text.split()
        text = " ".join(words[:room])
        room -= len(words)
        kept.append((text, nums))
    return " ".join(t for t, _ in kept), kept


def resolve_expertise(value: Any) -> str | None:
    """A ``user_expertise`` value → prompt id (``"P.0"`` … ``"P.3"``), or None when unknown."""
    if not isinstance(value, str):
        return None
    v = value.strip()
    if v.upper() in EXPERTISE_PROMPTS:
        return v.upper()
    return EXPERTISE_LEVELS.get(v.lower())


class CIRGenerator:
    """CIR's generation step (CIR at TREC 2024 RAG, §2.2, Table 2).

    Per question: the expertise prompt (``[cir] prompt``, or the question's
    ``user_expertise`` field when ``[cir] use_question_expertise`` and the field is present,
    :data:`EXPERTISE_LEVELS`); the Table 2 prompt over the context passages, fitted to the
    LLM's window like PreQRAG's (:func:`preqrag.components.generation.fit_prompt`); one greedy LLM call
    (``generator.max_new_tokens``); :func:`parse_cir_answer`. The answer text is the
    sentences joined, cut to ``generator.max_words`` (300: LiveRAG reads no more); the
    citations are the kept sentences' passage numbers.

    Fallbacks (recorded in ``Generated.fallbacks``, then ``Trace.fallbacks``; never a
    crash): a reply that is not usable JSON → the raw reply is the answer, with no
    citations (``citations == []``); an unknown ``user_expertise`` → the configured prompt;
    skipped malformed sentence items are noted. A failed LLM call → the LLMError as the
    answer (the pipeline records the question's failure).

    """

    name = "cir"

    def __init__(self, llm: LLM, cfg: GeneratorConfig, cir: CIRConfig, sentence_scorer=None):
        self.llm = llm
        self.cfg = cfg
        self.cir = cir
        self.sentence_scorer = sentence_scorer  # cross-encoder: score(pairs) -> logits

    def _expertise(self, extra: dict | None) -> tuple[str, str | None]:
        """(prompt id, fallback or None) for one question."""
        if not self.cir.use_question_expertise or not extra or "user_expertise" not in extra:
            return self.cir.prompt, None
        value = extra["user_expertise"]
        pid = resolve_expertise(value)
        if pid is None:
            return self.cir.prompt, f"generate: unknown user_expertise {value!r}, used {self.cir.prompt}"
        return pid, None

    def generate(self, questions: list[str], contexts: list[list[str]],
                 extras: list[dict] | None = None) -> list[Generated]:
        llm = self.llm
        count, window = llm.count_tokens, llm.context_window
        chosen = [self._expertise(extras[i] if extras else None) for i in range(len(questions))]
        fmt = self.cir.answer_format
        notes: list[list[str]] = [[] for _ in questions]
        if self.cfg.context_tokens:  # each segment's answer-bearing sentences (preqrag.components.selection)
            contexts, picked = select_batch(questions, contexts, max_tokens=self.cfg.context_tokens, count=count,
                                            cross_encoder=self.sentence_scorer)
            notes = [[f"generate: {t}" for t in n] for n in picked]
        fitted = []
        for q, c, (pid, _) in zip(questions, contexts, chosen):
            fitted.append(fit_prompt(q, c, prompt=pid, count=count, window=window,
                                     max_new_tokens=self.cfg.max_new_tokens,
                                     max_passage_tokens=self.cfg.max_passage_tokens,
                                     builder=lambda qq, ps, pid=pid: build_cir_prompt(qq, ps, pid, fmt)))
        schemas = [None if fmt == "text" else
                   cir_answer_schema(max(1, f.n_passages), self.cfg.max_new_tokens, self.cir.min_sentences,
                                     self.cir.max_sentences)
                   for f in fitted]
        replies = chat_grouped(llm, [[{"role": "user", "content": f.text}] for f in fitted], schemas,
                               [self.cfg.max_new_tokens] * len(fitted), **answer_options(self.cfg))
        first = [None if isinstance(r, LLMError) else self._parse(r, f.n_passages) for f, r in zip(fitted, replies)]
        rewritten = self._rewrite_copies(questions, fitted, contexts, first, schemas) if self.cir.rewrite_copies else {}
        drafts: list[tuple[list, list[str], ParsedAnswer | None]] = []  # (sentences, fallbacks, parse)
        for i, (reply, (_, expertise_fb)) in enumerate(zip(replies, chosen)):
            fallbacks = [expertise_fb] if expertise_fb else []
            if isinstance(reply, LLMError):
                drafts.append(([], fallbacks, None))
                continue
            parsed = first[i]
            if i in rewritten:
                again_reply, copies = rewritten[i]
                again = self._parse(again_reply, fitted[i].n_passages) if isinstance(again_reply, str) else None
                if again is not None and again.fallback is None:
                    fallbacks.append(f"generate: {copies} copied sentence(s): answer rewritten")
                    parsed = again
                else:
                    fallbacks.append("generate: copied sentence(s), the rewrite failed: the first answer kept")
            sentences: list[tuple[str, list[int]]] = []
            if parsed.fallback is None:
                sentences = list(parsed.sentences)
                why = degenerate(" ".join(t for t, _ in sentences))
                if why is not None:  # a looping reply: each sentence once, in order
                    sentences = drop_repeats(sentences)
                    fallbacks.append(f"generate: degenerate answer ({why}); repeats removed")
            drafts.append((sentences, fallbacks, parsed))
        if self.cir.paraphrase_copies:
            self._paraphrase_copies(fitted, contexts, drafts)
        out = []
        for f, reply, sel, (sentences, fallbacks, parsed) in zip(fitted, replies, notes, drafts):
            truncations = sel + [f"generate: {t}" for t in f.truncations]
            if isinstance(reply, LLMError):
                out.append(Generated(f.text, reply, truncations, None, 0, tuple(fallbacks), n_passages=f.n_passages))
                continue
            if parsed.fallback is not None:
                fallbacks.append(f"generate: {parsed.fallback}; the raw reply is the answer, without citations")
                answer, cites = truncate_words(reply, self.cfg.max_words), []
            else:
                if parsed.skipped:
                    fallbacks.append(f"generate: {parsed.skipped} malformed sentence item(s) skipped")
                if parsed.cut:
                    fallbacks.append(f"generate: reply cut at the token budget ({self.cfg.max_new_tokens}); "
                                     f"its {len(parsed.sentences)} complete sentence(s) kept")
                answer, cites = join_sentences(sentences, self.cfg.max_words)
            out.append(Generated(f.text, answer, truncations, cites, parsed.removed, tuple(fallbacks),
                                 n_passages=f.n_passages))
        return out

    def _paraphrase_copies(self, fitted, contexts, drafts: list[tuple[list, list[str], Any]]) -> None:
        """``[cir] paraphrase_copies``: every answer sentence that copies a segment
        (:func:`preqrag.components.answering.copied_sentences`, after the rewrite turn) said again
        in one short turn of its own (:data:`PARAPHRASE_PROMPT`), all in one batched call; a sentence
        keeps its citations. A paraphrase that is empty, fails, or keeps fewer than
        :data:`PARAPHRASE_MIN_SUPPORT` of its content words from the sentence leaves the sentence
        as it was. Edits ``drafts`` (per question: sentences, fallbacks, parse) in place and notes
        each question's count in its fallbacks."""
        slots: list[tuple[int, int]] = []
        for i, (sentences, _, _) in enumerate(drafts):
            if sentences:
                copied = copied_sentences([t for t, _ in sentences], contexts[i][:fitted[i].n_passages])
                slots += [(i, j) for j, c in enumerate(copied) if c]
        if not slots:
            return
        requests = [[{"role": "user", "content": PARAPHRASE_PROMPT.format(sentence=drafts[i][0][j][0])}]
                    for i, j in slots]
        replies = self.llm.chat_many(requests, max_tokens=PARAPHRASE_MAX_TOKENS, **answer_options(self.cfg))
        done: dict[int, list[int]] = {}
        for (i, j), reply in zip(slots, replies):
            old, ids = drafts[i][0][j]
            new = ""
            if isinstance(reply, str):
                first_sentence = split_sentences(_PARAPHRASE_LABEL.sub("", reply.strip()).strip("\"'“”` "))
                new = first_sentence[0] if first_sentence else ""
            support = word_support(new, old)
            ok = support is not None and support >= PARAPHRASE_MIN_SUPPORT
            done.setdefault(i, [0, 0])[0 if ok else 1] += 1
            if ok:
                drafts[i][0][j] = (new, ids)
        for i, (ok, kept) in done.items():
            note = f"generate: {ok + kept} sentence(s) still copied a segment: {ok} paraphrased"
            drafts[i][1].append(note + (f", {kept} kept (the paraphrase failed or changed it)" if kept else ""))

    def _parse(self, reply: str, n_passages: int) -> ParsedAnswer:
        """A reply parsed in the configured ``[cir] answer_format``."""
        if self.cir.answer_format == "text":
            return parse_cir_text(reply, n_passages)
        return parse_cir_answer(reply, n_passages)

    def _rewrite_copies(self, questions, fitted, contexts, parsed: list[ParsedAnswer | None],
                        schemas) -> dict[int, tuple[Any, int]]:
        """The follow-up turn (:data:`REWRITE_PROMPT`) for every parsed first answer whose sentences
        copy a segment (:func:`preqrag.components.answering.copied_sentences`), in one batched call. Returns,
        by question index, the new reply (a str, or the LLMError) and the number of copied sentences."""
        copies: dict[int, int] = {}
        for i, (f, p) in enumerate(zip(fitted, parsed)):
            if p is not None and p.fallback is None:
                n = sum(copied_sentences([t for t, _ in p.sentences], contexts[i][:f.n_passages]))
                if n:
                    copies[i] = n
        if not copies:
            return {}
        idx = list(copies)
        if self.cir.answer_format == "text":
            prompt, drafts = TEXT_REWRITE_PROMPT, [text_draft(parsed[i].sentences) for i in idx]
        else:
            prompt = REWRITE_PROMPT
            drafts = [json.dumps({"sentences": [{"text": t, "ids": n} for t, n in parsed[i].sentences]}) for i in idx]
        requests = [[{"role": "user", "content": _fill(prompt, question=questions[i], draft=d)}]
                    for i, d in zip(idx, drafts)]
        floor, turn = self.cir.rewrite_min_sentences, [schemas[i] for i in idx]
        if floor is not None and self.cir.answer_format == "json":  # the rewrite's own minItems
            turn = [cir_answer_schema(max(1, fitted[i].n_passages), self.cfg.max_new_tokens, floor,
                                      self.cir.max_sentences) for i in idx]
        again = chat_grouped(self.llm, requests, turn, [self.cfg.max_new_tokens] * len(idx), **answer_options(self.cfg))
        return {i: (r, copies[i]) for i, r in zip(idx, again)}
