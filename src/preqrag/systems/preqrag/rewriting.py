"""Question rewriting and decomposition (PreQRAG §2.2).

* Single-document question → two LLM rewrites: a web-search-style query for BM25 and a
  premise-free, focused question for dense retrieval (§2.2.1).
* Multi-document question → LLM decomposition into sub-questions (§2.2.2; two in the
  paper, or an adaptive number).

LLM output is untrusted. Each call declares a JSON schema (:func:`rewrite_schema`,
:func:`decompose_schema`), so a backend that enforces it (llama.cpp grammars, servers'
``response_format``) always returns parsable JSON. The reply is still checked and rejected —
the original question is used in its place and a fallback recorded in the QueryPlan — when it
does not parse (a backend that ignored the schema), is much longer than the question, shares no
content word with it, repeats a sub-question, or when the call fails.

The paper does not publish its rewriting prompts; the prompts below follow its
descriptions and use its own examples (§2.2.1, §2.2.2) as one-shot demonstrations.
"""

from __future__ import annotations

import re

from ...core.config import RewriterConfig
from ...models.llm.structured import chars_for, chat_grouped, json_field, string_field, string_list_field
from ...core.records import QueryPlan, QuestionType, SubQuery
from ...core.contracts import LLM, LLMError, Retriever
from ...core.text import clean_reply_line, content_words

SPARSE_PROMPT = """Rewrite the question as a short web search query for a keyword search engine.
Fix spelling mistakes, keep the important keywords, drop filler words.
Reply with JSON: {{"query": "<the query>"}}

Question: I'm developing new methods for protein analysis and wondering what specific technological improvements are being made to HDX methodology for complex protein systems?
Reply: {{"query": "Recent technological advancements in HDX methodology for complex protein systems"}}

Question: {question}
Reply:"""

DENSE_PROMPT = """Rewrite the question as one concise, self-contained question.
Fix spelling mistakes, remove personal premises and unnecessary context, and keep every key term.
Reply with JSON: {{"question": "<the rewritten question>"}}

Question: I'm developing new methods for protein analysis and wondering what specific technological improvements are being made to HDX methodology for complex protein systems?
Reply: {{"question": "What specific technological improvements are being made to HDX methodology for complex protein systems?"}}

Question: {question}
Reply:"""

DECOMPOSE_PROMPT = """Split the question into exactly {n} simple sub-questions, each answerable from a single document.
Reply with JSON: {{"sub_questions": ["<sub-question 1>", ..., "<sub-question {n}>"]}}

Question: How does Azure Firewall enable network segmentation, and what are the security compliance aspects of integrating it with Azure Key Vault Managed HSM?
Reply: {{"sub_questions": ["How does Azure Firewall enable network segmentation?", "What are the security compliance aspects of integrating Azure Key Vault Managed HSM with Azure Firewall?"]}}

Question: {question}
Reply:"""

REWRITE_KEYS = {"sparse": "query", "dense": "question"}
"""The JSON field each rewrite is read from (its schema: :func:`rewrite_schema`)."""
SUB_QUESTIONS_KEY = "sub_questions"
MAX_QUERY_CHARS = 200
"""Longest rewrite or sub-question, in characters (the schema's ``maxLength``): ~40 words,
more than a focused query needs, and short enough that the JSON reply closes within the
reply budget (``rewriter.max_new_tokens`` tokens per query)."""


def rewrite_schema(kind: str, max_tokens: int = 128) -> dict:
    """JSON Schema of a ``sparse`` or ``dense`` rewrite: ``{"query": str}`` /
    ``{"question": str}``, 3 characters up to :data:`MAX_QUERY_CHARS` or what ``max_tokens``
    reply tokens hold (:func:`preqrag.models.llm.structured.chars_for`), so the reply closes in budget."""
    return string_field(REWRITE_KEYS[kind], min_length=3, max_length=chars_for(max_tokens, MAX_QUERY_CHARS))


def decompose_schema(n: int, max_tokens_each: int = 128) -> dict:
    """JSON Schema of a decomposition: ``{"sub_questions": [str] * n}`` (PreQRAG §2.2.2: ``n`` =
    2), each 3 characters up to :data:`MAX_QUERY_CHARS` or what ``max_tokens_each`` tokens hold
    (the call's budget is ``n * max_tokens_each``)."""
    return string_list_field(SUB_QUESTIONS_KEY, min_items=n, max_items=n, min_length=3,
                             max_length=chars_for(max_tokens_each, MAX_QUERY_CHARS))


_NUMBERED = re.compile(r"^\s*(?:sub-?question\s*)?(\d+)\s*[.):-]\s*(.+?)\s*$", re.I)


def _unrelated(candidate: str, question: str) -> bool:
    """True when ``candidate`` shares no content word with ``question`` (e.g. a small model
    copying the prompt's demonstration instead of rewriting the question)."""
    return not (content_words(candidate, stem=False) & content_words(question, stem=False))


def parse_rewrite(reply: str, question: str, max_length_ratio: float) -> tuple[str | None, str | None]:
    """Parse a one-line rewrite.

    Returns:
        ``(rewrite, None)`` when accepted, or ``(None, reason)`` with reason one of
        ``empty``, ``unparsable`` (no letters), ``too long`` (more words than
        ``max(30, max_length_ratio * words(question))``), ``unrelated`` (no content word in
        common with the question).
    """
    lines = [clean_reply_line(line) for line in reply.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return None, "empty"
    rewrite = lines[0]
    if not re.search(r"[A-Za-z0-9]", rewrite):
        return None, "unparsable"
    limit = max(30, max_length_ratio * len(question.split()))
    if len(rewrite.split()) > limit:
        return None, "too long"
    if _unrelated(rewrite, question):
        return None, "unrelated"
    return rewrite, None


def parse_sub_questions(reply: str, question: str, n: int, max_length_ratio: float) -> tuple[list[str] | None, str | None]:
    """Parse a numbered list of sub-questions.

    Accepts lines ``1. ...``, ``2) ...``, ``Sub-question 1: ...``; requires at least two
    distinct numbered items, keeps the first ``n``. Each item must pass the same length
    and relatedness checks as :func:`parse_rewrite`.

    Returns:
        ``(sub_questions, None)`` or ``(None, reason)``: ``empty``, ``unparsable`` (fewer
        than two numbered items), ``too long``, ``unrelated``.
    """
    if not reply.strip():
        return None, "empty"
    items: list[str] = []
    for line in reply.splitlines():
        m = _NUMBERED.match(line)
        if m:
            text = clean_reply_line(m.group(2))
            if text and re.search(r"[A-Za-z]", text) and text.lower() not in {i.lower() for i in items}:
                items.append(text)
    if len(items) < 2:
        return None, "unparsable"
    return _checked_items(items[:n], question, max_length_ratio)


def _checked_items(items: list[str], question: str, max_length_ratio: float) -> tuple[list[str] | None, str | None]:
    """``(items, None)``, or ``(None, "too long")`` when an item has more words than
    ``max(30, max_length_ratio * words(question))``, ``(None, "unrelated")`` when one shares no
    content word with the question."""
    limit = max(30, max_length_ratio * len(question.split()))
    if any(len(i.split()) > limit for i in items):
        return None, "too long"
    if any(_unrelated(i, question) for i in items):
        return None, "unrelated"
    return items, None


def parse_rewrite_reply(reply: str, kind: str, question: str,
                        max_length_ratio: float) -> tuple[str | None, str | None]:
    """Parse a structured rewrite reply (:func:`rewrite_schema`): the JSON field of ``kind``,
    then :func:`parse_rewrite`'s checks on its text.

    Returns:
        ``(rewrite, None)``, or ``(None, reason)``: ``empty`` / ``unparsable JSON: ...`` /
        ``unparsable: no "query" field`` (the reply did not parse: a backend that ignored the
        schema, or a reply cut at the token budget), or a check's reason (``too long``,
        ``unrelated``: it parsed but makes no sense).
    """
    text, err = json_field(reply, REWRITE_KEYS[kind], str)
    if err:
        return None, err
    return parse_rewrite(text, question, max_length_ratio)


def parse_sub_questions_reply(reply: str, question: str, n: int,
                              max_length_ratio: float) -> tuple[list[str] | None, str | None]:
    """Parse a structured decomposition reply (:func:`decompose_schema`): its
    ``sub_questions`` list, each cleaned like a rewrite; repeats are dropped; at least two
    distinct items are needed, the first ``n`` kept, each passing the length and relatedness
    checks of :func:`parse_sub_questions`.

    Returns:
        ``(sub_questions, None)`` or ``(None, reason)``: a parse reason (``empty``,
        ``unparsable JSON: ...``, ``unparsable: no "sub_questions" list``) or a sense reason
        (``repeated sub-questions``, ``too long``, ``unrelated``).
    """
    raw, err = json_field(reply, SUB_QUESTIONS_KEY, list)
    if err:
        return None, err
    items: list[str] = []
    for x in raw:
        text = clean_reply_line(" ".join(x.split())) if isinstance(x, str) else ""
        if text and re.search(r"[A-Za-z]", text) and text.lower() not in {i.lower() for i in items}:
            items.append(text)
    if len(items) < 2:
        return None, "repeated sub-questions" if len(raw) >= 2 else "fewer than two sub-questions"
    return _checked_items(items[:n], question, max_length_ratio)


class PreQRAGRewriter:
    """The PreQRAG rewriter: 2 rewrites for single-doc, decomposition for multi-doc questions.

    Args:
        llm: the LLM (loads its model on first use, or at ``warm_up``).
        cfg: ``keep_original`` (also retrieve with the original question), ``n_sub_questions`` (2, paper §2.2.2, or ``"adaptive"``: see
            ``preqrag.components.classifiers.subquestions.estimate_n_sub_questions``),
            ``max_length_ratio``, ``max_new_tokens``.
    """

    name = "preqrag"

    def __init__(self, llm: LLM, cfg: RewriterConfig):
        self.llm = llm
        self.cfg = cfg

    def _n_sub(self, question: str) -> int:
        if self.cfg.n_sub_questions == "adaptive":
            from ...components.classifiers.subquestions import estimate_n_sub_questions

            return estimate_n_sub_questions(question)
        return int(self.cfg.n_sub_questions)

    def retriever(self, retriever: Retriever) -> Retriever:
        """Its plans filter nothing: ``retriever`` itself."""
        return retriever

    def plan(self, questions: list[str], types: list[QuestionType]) -> list[QueryPlan]:
        """One QueryPlan per question; LLM calls of the whole batch go out together.

        Never raises for LLM trouble: a failed call (LLMError) is a fallback like junk output.
        """
        requests: list[list[dict]] = []
        schemas: list[dict] = []
        budgets: list[int] = []
        slots: list[tuple[int, str]] = []
        n_subs: dict[int, int] = {}
        for i, (q, t) in enumerate(zip(questions, types)):
            if t == "single" or not self.cfg.decompose:
                for kind, prompt in (("sparse", SPARSE_PROMPT), ("dense", DENSE_PROMPT)):
                    requests.append([{"role": "user", "content": prompt.format(question=q)}])
                    schemas.append(rewrite_schema(kind, self.cfg.max_new_tokens))
                    budgets.append(self.cfg.max_new_tokens)
                    slots.append((i, kind))
            else:
                n_subs[i] = self._n_sub(q)
                requests.append([{"role": "user", "content": DECOMPOSE_PROMPT.format(question=q, n=n_subs[i])}])
                schemas.append(decompose_schema(n_subs[i], self.cfg.max_new_tokens))
                budgets.append(self.cfg.max_new_tokens * n_subs[i])
                slots.append((i, "decompose"))
        replies = chat_grouped(self.llm, requests, schemas, budgets, temperature=0.0) if requests else []
        by_q: dict[int, dict[str, str | LLMError]] = {}
        for (i, kind), reply in zip(slots, replies):
            by_q.setdefault(i, {})[kind] = reply

        plans = []
        for i, (q, t) in enumerate(zip(questions, types)):
            fallbacks: list[str] = []
            raw: dict[str, str] = {}
            got = by_q.get(i, {})
            if t == "single" or not self.cfg.decompose:
                texts = {}
                for kind in ("sparse", "dense"):
                    reply = got.get(kind)
                    if isinstance(reply, LLMError) or reply is None:
                        fallbacks.append(f"{kind}: llm error: {reply}")
                        texts[kind] = q
                        continue
                    raw[kind] = reply
                    text, reason = parse_rewrite_reply(reply, kind, q, self.cfg.max_length_ratio)
                    if text is None:
                        fallbacks.append(f"{kind}: {reason}")
                    texts[kind] = text or q
                extra = [q] if self.cfg.keep_original and (texts["sparse"] != q or texts["dense"] != q) else []
                subs = [SubQuery(text=q, sparse=texts["sparse"], dense=texts["dense"], extra=extra)]
            else:
                reply = got.get("decompose")
                items = None
                if isinstance(reply, LLMError) or reply is None:
                    fallbacks.append(f"decompose: llm error: {reply}")
                else:
                    raw["decompose"] = reply
                    items, reason = parse_sub_questions_reply(reply, q, n_subs[i], self.cfg.max_length_ratio)
                    if items is None:
                        fallbacks.append(f"decompose: {reason}")
                subs = [SubQuery(text=s, sparse=s, dense=s) for s in (items or [q])]
                if self.cfg.keep_original and items:
                    subs.insert(0, SubQuery(text=q, sparse=q, dense=q))
            plans.append(QueryPlan(question_type=t, rewriter=self.name, sub_queries=subs,
                                   fallbacks=fallbacks, llm_outputs=raw))
        return plans
