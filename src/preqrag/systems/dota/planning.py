"""DoTA-RAG planning: typo-fixing rewrite (§2.1) and namespace routing with self-consistency (§2.2).

DoTA-RAG (Ruangtanusak et al., SIGIR 2025 LiveRAG, arXiv 2506.12571):

1. **Query rewriting** (§2.1, Fig. 3): the LLM rewrites the question, correcting typos and
   wording ("wut iz rajun cajun crawfsh festivl"). The Fig. 3 prompt is the system message
   and the question the user message, as in the authors' code (``rag/pipeline/
   routing_v6_final.py``, which samples at temperature 0.2, top-p 0.1; here greedy,
   ``dota.rewrite_temperature = 0``, which that near-greedy setting approximates and which
   the LLM cache can store).
2. **Namespace routing** (§2.2, Fig. 4): 4 independent classifications of the rewritten
   question (self-consistency, Wang et al. 2023) at temperature > 0; each names namespaces
   in ``\\boxed{}``; the namespaces named most often over all votes are tallied and the top 2
   searched (the authors' ``rag/namespace_router.py``: temperature 0.6, ``n=4``,
   ``Counter.most_common(2)``). Namespaces are WebOrganizer's 24 topics
   (:mod:`preqrag.systems.dota.topics`).

The plan is one :class:`~preqrag.core.records.SubQuery` whose ``sparse``/``dense`` text is the
rewrite and whose ``filters`` are ``{"topic": [top-2 namespaces]}``; the dense retriever
searches only those namespaces' passages. Over an index, the preset's rewriter
(:class:`preqrag.systems.dota.RoutedDotaRewriter`) replaces that filter by the parts of the namespaces
nearest the question, the votes weighing in (docs/preset-dota.md).

Both calls declare a reply schema (:func:`rewrite_schema`, :func:`route_schema`: the
namespaces an enum of the 24 names), so with a backend that enforces it every reply parses;
the prompts get a JSON format line appended (:data:`REWRITE_FORMAT`, :data:`ROUTE_FORMAT`; a
deviation from Fig. 3/4, which ask for free text and ``\\boxed{}``). :func:`parse_boxed`
still reads the paper's ``\\boxed{}`` votes. LLM output is untrusted (as in
:mod:`preqrag.systems.preqrag.rewriting`): a rewrite that is empty, has no
letters, is too long or shares no (typo-tolerant) content word with the question is
rejected and the question used; a vote that does not parse or names an unknown namespace
is discarded; with no valid vote the question is searched in every
namespace (no filter). Each is recorded in ``QueryPlan.fallbacks``; nothing raises.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter

from .settings import DotaConfig
from ...core.records import QueryPlan, QuestionType, SubQuery
from ...core.text import clean_reply_line, content_words
from ...models.llm.structured import CHARS_PER_TOKEN, chars_for, json_field, parse_json, string_field
from ...core.contracts import LLM, LLMError, Retriever
from .search import UnfilteredFallback
from .topics import FACET, TOPIC_NAMES

REWRITE_PROMPT = ("You are a helpful assistant. Your task is to rewrite sentences by correcting typos and "
                  "improving the wording to ensure they are written in clear, natural English. If a typo is "
                  "intentional or acceptable as-is, leave it unchanged.")
"""DoTA-RAG Fig. 3 (Query Rewriting), verbatim; sent as the system message, the question as
the user message (the authors' code)."""

ROUTE_PROMPT = """Q: {question}
Available namespaces: {choices_str}
Step1: Identify what the question is about.
Step2: Choose only the most relevant namespaces.
Step3: Return final result in \\boxed{{}}."""
"""DoTA-RAG Fig. 4 (Routing Namespace Classify), verbatim: the PDF's ``//boxed{}`` is
``\\boxed{}`` as in the authors' code, whose ``choices_str`` is the namespace names joined by
``", "``."""

ROUTE_FORMAT = ('\nReply with JSON: {{"about": "<what the question is about>", '
                '"namespaces": [<1 to {k} of the available namespaces>]}}')
"""Not in the paper: appended to Fig. 4's prompt. The reply is constrained by
:func:`route_schema` (the namespaces an ``enum`` of the 24 names), so every vote parses;
``about`` keeps Step 1 ("identify what the question is about") before the choice, as the
``\\boxed{}`` answer followed the model's reasoning in the paper."""
ROUTE_MAX_NAMESPACES = 3
"""Namespaces one vote may name (the schema's ``maxItems``); the tally keeps the top 2."""
ROUTE_ABOUT_CHARS = 120
"""Longest ``about`` text of a vote, in characters."""

REWRITE_FORMAT = '\nReply with JSON: {"rewritten": "<the corrected text>"}'
"""Not in the paper: appended to Fig. 3's system prompt; the reply is constrained by
:func:`rewrite_schema`."""
REWRITE_KEY = "rewritten"


def route_schema(namespaces: list[str], max_tokens: int = 128, k: int = ROUTE_MAX_NAMESPACES) -> dict:
    """A routing vote's reply schema: ``{"about": str, "namespaces": [1..k' of namespaces]}``.

    Fitted to ``max_tokens`` (``dota.route_max_new_tokens``): k' = as many names as fit (at least
    1, at most ``k``; a name costs its characters + 6 tokens), and ``about`` gets what is
    left, up to :data:`ROUTE_ABOUT_CHARS` characters, or is left out when fewer than 16 fit."""
    per_name = int(max((len(n) for n in namespaces), default=8) / CHARS_PER_TOKEN) + 6
    k = max(1, min(k, len(namespaces), (max_tokens - 16) // per_name))
    about = chars_for(max_tokens - 16 - k * per_name, ROUTE_ABOUT_CHARS, overhead=8)
    props: dict = {"namespaces": {"type": "array", "items": {"type": "string", "enum": list(namespaces)},
                                  "minItems": 1, "maxItems": k}}
    if about >= 16 and max_tokens - 16 - k * per_name > 8:
        props = {"about": {"type": "string", "minLength": 1, "maxLength": about}, **props}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def rewrite_schema(max_tokens: int = 128, max_chars: int = 300) -> dict:
    """The typo-fixing rewrite's reply schema: ``{"rewritten": str}`` of 3 characters up to
    ``max_chars`` or what ``max_tokens`` tokens hold."""
    return string_field(REWRITE_KEY, min_length=3, max_length=chars_for(max_tokens, max_chars))


def parse_route_reply(reply: str, namespaces: list[str]) -> tuple[list[str] | None, str | None]:
    """Parse a structured routing vote (:func:`route_schema`): the known namespaces it names,
    deduplicated, in order; ``(None, reason)`` when the reply is no such JSON (``empty``,
    ``unparsable JSON: ...``, ``no namespaces``) or names an unknown one (``unknown namespace:
    X``: a backend that ignored the schema)."""
    value, err = parse_json(reply)
    if err:
        return None, err
    items = value.get("namespaces") if isinstance(value, dict) else None
    if not isinstance(items, list) or not items:
        return None, "no namespaces"
    by_key = {_norm(n): n for n in namespaces}
    out: list[str] = []
    for x in items:
        name = by_key.get(_norm(x)) if isinstance(x, str) else None
        if name is None:
            return None, f"unknown namespace: {str(x)[:60]}"
        if name not in out:
            out.append(name)
    return out, None


ROUTE_SYSTEM = ("You are a helpful assistant that classifies questions into relevant topic namespaces. "
                "Only select from the list provided.")
"""System message of the routing call in the authors' code (``rag/namespace_router.py``); the
figure shows only the user message."""

_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")


def _norm(name: str) -> str:
    """Case- and spacing-insensitive key of a namespace name."""
    return re.sub(r"\s+", " ", name.strip().strip("'\"`*").strip()).lower()


def parse_boxed(reply: str, namespaces: list[str]) -> tuple[list[str] | None, str | None]:
    """Parse one routing vote: the namespaces named in the last ``\\boxed{...}`` of ``reply``.

    The box holds namespace names separated by commas (``\\boxed{Health, Politics}``), or a
    list literal (``\\boxed{['Health', 'Politics']}``). Names must match a namespace exactly
    up to case, surrounding quotes and spacing (a name that itself holds a comma, "Science,
    Math & Technology", is matched across the split); no abbreviations or fuzzy matches.

    Returns:
        ``(names, None)``: the known namespaces named, deduplicated, in order; or
        ``(None, reason)``: ``empty``, ``no boxed`` (no ``\\boxed{...}``), ``empty boxed``,
        ``unknown namespace: X`` (an item that is no namespace; the whole vote is discarded,
        since a vote that names unknown things is not one the prompt asked for).
    """
    if not reply or not reply.strip():
        return None, "empty"
    boxes = _BOXED.findall(reply)
    if not boxes:
        return None, "no boxed"
    content = boxes[-1].strip()
    if content.startswith("[") and content.endswith("]"):
        content = content[1:-1]
    items = [_norm(x) for x in re.split(r"[,;\n]", content)]
    items = [x for x in items if x]
    if not items:
        return None, "empty boxed"
    by_key = {_norm(n): n for n in namespaces}
    longest = max(n.count(",") for n in namespaces) + 1 if namespaces else 1
    out: list[str] = []
    i = 0
    while i < len(items):
        for width in range(min(longest, len(items) - i), 0, -1):  # a comma-holding name first
            key = ", ".join(items[i:i + width])
            if key in by_key:
                if by_key[key] not in out:
                    out.append(by_key[key])
                i += width
                break
        else:
            return None, f"unknown namespace: {items[i][:60]}"
    return out, None


def tally_votes(votes: list[list[str]]) -> Counter[str]:
    """Namespace → number of votes naming it (each vote counts a namespace once), in the order
    namespaces were first named (DoTA-RAG §2.2's self-consistency tally)."""
    tally: Counter[str] = Counter()
    for vote in votes:
        tally.update(list(dict.fromkeys(vote)))
    return tally


def count_votes(votes: list[list[str]], top_n: int) -> list[str]:
    """The ``top_n`` namespaces named by most votes (:func:`tally_votes`); ties go to the
    namespace named first (``collections.Counter.most_common`` order, as in the authors'
    code). ``[]`` when no vote names any."""
    return [name for name, _ in tally_votes(votes).most_common(top_n)]


def _similar_word(word: str, words: set[str]) -> bool:
    return word in words or any(difflib.SequenceMatcher(None, word, w).ratio() >= 0.75 for w in words)


def parse_typo_rewrite(reply: str, question: str, max_length_ratio: float) -> tuple[str | None, str | None]:
    """Parse a typo-fixing rewrite with :func:`preqrag.systems.preqrag.rewriting.parse_rewrite`'s checks
    (first non-empty line, prefixes and quotes stripped; ``empty``, ``unparsable``, ``too
    long``: more words than ``max(30, max_length_ratio * words(question))``), except that
    ``unrelated`` tolerates typos: some content word of the rewrite must equal or closely
    resemble (difflib ratio >= 0.75, e.g. "crawfish" ~ "crawfsh") a content word of the question.

    Returns:
        ``(rewrite, None)`` or ``(None, reason)``.
    """
    lines = [line for line in (clean_reply_line(x) for x in reply.splitlines()) if line]
    if not lines:
        return None, "empty"
    rewrite = lines[0]
    if not re.search(r"[A-Za-z0-9]", rewrite):
        return None, "unparsable"
    if len(rewrite.split()) > max(30, max_length_ratio * len(question.split())):
        return None, "too long"
    qwords = content_words(question, stem=False)
    if not any(_similar_word(w, qwords) for w in content_words(rewrite, stem=False)):
        return None, "unrelated"
    return rewrite, None


class NamespaceRouter:
    """Self-consistency namespace routing (DoTA-RAG §2.2, Fig. 4).

    Args:
        llm: the shared LLM.
        cfg: ``route_votes`` (4), ``route_temperature`` (0.6, > 0 so votes differ),
            ``route_seed`` (vote ``v`` samples with seed ``route_seed + v``),
            ``route_top_n`` (2), ``route_max_new_tokens``.
        namespaces: the names offered (default WebOrganizer's 24 topics).
    """

    def __init__(self, llm: LLM, cfg: DotaConfig, namespaces: list[str] | None = None):
        self.llm = llm
        self.cfg = cfg
        self.namespaces = list(namespaces or TOPIC_NAMES)

    def messages(self, question: str) -> list[dict]:
        """The routing conversation for ``question`` (system message + Fig. 4)."""
        return [{"role": "system", "content": ROUTE_SYSTEM},
                {"role": "user", "content": ROUTE_PROMPT.format(question=question,
                                                                choices_str=", ".join(self.namespaces))
                 + ROUTE_FORMAT.format(k=min(ROUTE_MAX_NAMESPACES, len(self.namespaces)))}]

    def route(self, questions: list[str]) -> list[tuple[list[str], list[str], dict[str, str]]]:
        """Route a batch: per question ``(namespaces, fallbacks, raw replies by "route V")``.

        ``namespaces`` is the top-``route_top_n`` of the valid votes, or ``[]`` (search
        everything) with fallback ``route: no valid vote`` when none parsed. Each discarded
        vote adds ``route vote V: <reason>``. One ``chat_many`` call for every vote of the batch,
        vote ``v`` seeded ``route_seed + v``: a batching backend prefills each question's routing
        prompt once for all its votes (:class:`preqrag.models.llm.batching.BatchDecoder`).
        """
        votes = self.cfg.route_votes
        requests = [self.messages(q) for q in questions for _ in range(votes)]
        schema = route_schema(self.namespaces, self.cfg.route_max_new_tokens)
        replies = self.llm.chat_many(requests, max_tokens=self.cfg.route_max_new_tokens,
                                     temperature=self.cfg.route_temperature, schema=schema,
                                     seed=[self.cfg.route_seed + v for _ in questions for v in range(votes)]
                                     ) if requests else []
        per_vote = [replies[v::votes] for v in range(votes)]
        out = []
        for i in range(len(questions)):
            votes: list[list[str]] = []
            fallbacks: list[str] = []
            raw: dict[str, str] = {}
            for v, replies in enumerate(per_vote):
                reply = replies[i]
                if isinstance(reply, LLMError):
                    fallbacks.append(f"route vote {v + 1}: llm error: {reply}")
                    continue
                raw[f"route {v + 1}"] = reply
                names, reason = parse_route_reply(reply, self.namespaces)
                if names is None:
                    fallbacks.append(f"route vote {v + 1}: {reason}")
                else:
                    votes.append(names)
            chosen = count_votes(votes, self.cfg.route_top_n)
            if not chosen:
                fallbacks.append("route: no valid vote (all namespaces searched)")
            out.append((chosen, fallbacks, raw))
        return out


class DotaRewriter:
    """The DoTA-RAG plan slot: typo-fixing rewrite, then namespace routing of the rewrite.

    Produces one SubQuery per question: ``sparse == dense ==`` the rewrite (or the question on
    fallback), ``filters == {"topic": namespaces}`` (``{}`` when routing is off or found no
    valid vote). ``llm_outputs`` keeps the raw replies (``rewrite``, ``route 1..n``).

    Args:
        llm: the shared LLM.
        cfg: the ``[dota]`` table.
        route: route at all (False: the rewrite only, every namespace searched).
        max_length_ratio: rewrite length cap (``rewriter.max_length_ratio``).
    """

    name = "dota"

    def __init__(self, llm: LLM, cfg: DotaConfig, *, route: bool = True, max_length_ratio: float = 3.0):
        self.llm = llm
        self.cfg = cfg
        self.route = route
        self.max_length_ratio = max_length_ratio
        self.router = NamespaceRouter(llm, cfg)

    def retriever(self, retriever: Retriever) -> UnfilteredFallback:
        """``retriever`` searching a routed query again without its filter when the filter leaves
        no passage (:class:`~preqrag.systems.dota.search.UnfilteredFallback`)."""
        return UnfilteredFallback(retriever)

    def plan(self, questions: list[str], types: list[QuestionType]) -> list[QueryPlan]:
        """One QueryPlan per question. Never raises for LLM trouble (fallbacks instead)."""
        replies = self.llm.chat_many(
            [[{"role": "system", "content": REWRITE_PROMPT + REWRITE_FORMAT}, {"role": "user", "content": q}]
             for q in questions],
            max_tokens=self.cfg.rewrite_max_new_tokens, temperature=self.cfg.rewrite_temperature,
            top_p=self.cfg.rewrite_top_p, schema=rewrite_schema(self.cfg.rewrite_max_new_tokens)) if questions else []
        rewrites: list[str] = []
        fallbacks: list[list[str]] = []
        raws: list[dict[str, str]] = []
        for q, reply in zip(questions, replies):
            fb: list[str] = []
            raw: dict[str, str] = {}
            if isinstance(reply, LLMError):
                fb.append(f"rewrite: llm error: {reply}")
                text = None
            else:
                raw["rewrite"] = reply
                text, reason = json_field(reply, REWRITE_KEY, str)
                if text is not None:
                    text, reason = parse_typo_rewrite(text, q, self.max_length_ratio)
                if text is None:
                    fb.append(f"rewrite: {reason}")
            rewrites.append(text or q)
            fallbacks.append(fb)
            raws.append(raw)
        routes = self.router.route(rewrites) if self.route else [([], [], {}) for _ in questions]
        plans = []
        for q, t, rw, fb, raw, (names, route_fb, route_raw) in zip(questions, types, rewrites, fallbacks, raws,
                                                                  routes):
            raw.update(route_raw)
            keep = [q] if self.cfg.search_question and rw != q else []  # the question too (not in the paper)
            sub = SubQuery(text=rw, sparse=rw, dense=rw, extra=keep, filters={FACET: names} if names else {})
            plans.append(QueryPlan(question_type=t, rewriter=self.name, sub_queries=[sub],
                                   fallbacks=fb + route_fb, llm_outputs=raw))
        return plans
