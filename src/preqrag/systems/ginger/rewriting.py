"""GINGER multi-query rewriting (UiS-IAI@LiveRAG §3.1, prompts of Appendix B.1).

Two LLM calls per question, batched over the questions of a batch:

1. the LLM answers the question without documents ("a short answer ... surfaces the key
   aspects of the information need");
2. the LLM writes ``n`` query rewrites, one per line, "each of which should cover a different
   aspect of the answer".

The plan keeps the original question (Table 1: original + 3 rewrites, R@500 0.397, beats 3
rewrites alone, 0.325, and the original alone, 0.320). Two ways to send them to retrieval
(``[ginger] query_mode``):

* ``fuse`` (default): one :class:`~preqrag.core.records.SubQuery` with ``sparse = dense =`` the
  original question and ``extra =`` the rewrites; the pipeline sends every query to BM25 and
  dense and fuses all lists (``[fusion] name = "rrf"``: reciprocal rank fusion, as in §3.1);
* ``concatenate``: the paper's single search string q' = (q + q'1) + ... + (q + q'l).

The rewrite call declares a JSON schema (:func:`rewrites_schema`: ``n`` strings; the paper asks
for one query per line), so its reply parses; each rewrite is still checked
(:func:`parse_rewrites_reply`, :func:`parse_rewrites`); a failed call,
an empty reply or lines that are not rewrites fall back (fewer rewrites, or the original
question alone) and every fallback is recorded in :attr:`QueryPlan.fallbacks`.
"""

from __future__ import annotations

import re

from ...core.config import RewriterConfig
from .settings import GingerConfig
from ...core.records import QueryPlan, QuestionType, SubQuery
from ...core.contracts import LLM, LLMError, Retriever
from ...core.text import cap_tokens, content_words

# Appendix B.1, verbatim (the number of rewrites, 3 in the paper, is ``{n}``).
ANSWER_SYSTEM = ("You are a knowledgeable question answering AI that can answer a wide range of queries either in "
                 "question form or keywords.")
ANSWER_USER = "{query}."
REWRITE_SYSTEM = ("You are a query rewriter that understands all necessary components of a good search query and "
                  "helps users improve their queries.")
REWRITE_USER = ("Rewrite and return {n} query rewrites, each of which should cover a different aspect of the "
                "answer. The query rewrites should still be relevant to the original query. Return only the "
                "queries, one in each line. Do not add context, or any other information, or text.\n"
                "original query: {query}\nanswer: {answer}")

REWRITES_FORMAT = '\nReply with JSON: {{"rewrites": ["<rewrite 1>", ..., "<rewrite {n}>"]}}'
"""Not in the paper: appended to App. B.1's rewrite prompt, whose reply is constrained by
:func:`rewrites_schema` (the paper asks for one query per line)."""
REWRITES_KEY = "rewrites"
MAX_REWRITE_CHARS = 200
"""Longest rewrite in characters (the schema's ``maxLength``), as PreQRAG's rewrites."""


def rewrites_schema(n: int, max_tokens_each: int = 128) -> dict:
    """The rewrite call's reply schema: ``{"rewrites": [str] * n}``, each 3 characters up to
    :data:`MAX_REWRITE_CHARS` or what ``max_tokens_each`` tokens hold (the call's budget is
    ``n * max_tokens_each``)."""
    from ...models.llm.structured import chars_for, string_list_field

    return string_list_field(REWRITES_KEY, min_items=n, max_items=n, min_length=3,
                             max_length=chars_for(max_tokens_each, MAX_REWRITE_CHARS))


def parse_rewrites_reply(reply: str, question: str, n: int, *, answer: str = "",
                         max_length_ratio: float = 3.0) -> tuple[list[str], list[str]]:
    """Parse a structured rewrite reply (:func:`rewrites_schema`): its ``rewrites`` items go
    through :func:`parse_rewrites`' checks as lines. ``rejected`` is ``["empty"]`` /
    ``["unparsable JSON: ..."]`` / ``["unparsable: no 'rewrites' list"]`` when it did not
    parse."""
    from ...models.llm.structured import json_field

    items, err = json_field(reply, REWRITES_KEY, list)
    if err:
        return [], [err]
    lines = [" ".join(x.split()) for x in items if isinstance(x, str)]
    return parse_rewrites("\n".join(lines), question, n, answer=answer, max_length_ratio=max_length_ratio)


TOKENS_PER_ANSWER_WORD = 1.6
"""Reply tokens budgeted per intermediate-answer word (English runs ~1.3 tokens a word in Qwen2.5's
and Llama's vocabularies; the rest is room to spare)."""


def answer_max_tokens(words: int) -> int:
    """Reply budget of the intermediate answer for ``[ginger] answer_words`` (``words``): what
    that many words take (:data:`TOKENS_PER_ANSWER_WORD` each); the words after them are cut
    anyway, and decoding them took ~30 % of the answer call (16 dev questions,
    Qwen2.5-Coder-1.5B, 100 words: 257 decoding steps and 77 s uncapped, 161 and 56 s capped)."""
    return int(round(words * TOKENS_PER_ANSWER_WORD))


_BULLET = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.):\]]|#+)\s*")
_LABEL = re.compile(r"^\s*(?:(?:query\s*)?rewrites?|rewritten query|query|search query|q\d*)\s*\d*\s*[:.-]\s*",
                    re.I)
_ECHO = re.compile(r"^\s*(?:original query|answer)\s*:|query rewrites|return only the queries", re.I)
_CHATTER = re.compile(r"^\s*(?:sure\b|here (?:are|is)\b|i'm\b|i am\b|i can\b|i will\b|as an ai\b|"
                      r"the answer\b|certainly\b|of course\b)", re.I)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def parse_rewrites(reply: str, question: str, n: int, *, answer: str = "",
                   max_length_ratio: float = 3.0) -> tuple[list[str], list[str]]:
    """Parse the rewrite reply: one query per line.

    Each non-empty line is stripped of list markers (``1.``, ``-``, ``*``), labels
    (``Query 2:``, ``Rewrite:``) and quotes, then rejected when it
    ``echo``-es the prompt (``original query: ...``, ``answer: ...``), is assistant ``chatter``
    rather than a query (starts "Sure", "Here are", "I'm", "The answer" ...), has no letter or digit
    (``unparsable``), has more words than ``max(30, max_length_ratio * words(question))``
    (``too long``), shares no content word with the question or the intermediate ``answer``
    (``unrelated``: e.g. a small model copying the instruction), or repeats the question or an
    earlier rewrite (``duplicate``). The first ``n`` accepted lines are kept.

    Returns:
        ``(rewrites, rejected)``: at most ``n`` rewrites, in reply order, and one reason per
        rejected line (``["empty"]`` for an empty reply).
    """
    if not reply.strip():
        return [], ["empty"]
    related = content_words(question) | content_words(answer)
    limit = max(30, max_length_ratio * len(question.split()))
    seen = {_norm(question)}
    out: list[str] = []
    rejected: list[str] = []
    for raw in reply.splitlines():
        line = _LABEL.sub("", _BULLET.sub("", raw.strip())).strip().strip("\"'“”`* ").strip()
        if not line:
            continue
        if _ECHO.search(line):
            rejected.append("echo")
        elif _CHATTER.search(line):
            rejected.append("chatter")
        elif not re.search(r"[A-Za-z0-9]", line):
            rejected.append("unparsable")
        elif len(line.split()) > limit:
            rejected.append("too long")
        elif not (content_words(line) & related):
            rejected.append("unrelated")
        elif _norm(line) in seen:
            rejected.append("duplicate")
        else:
            seen.add(_norm(line))
            out.append(line)
            if len(out) == n:
                break
    return out, rejected


def concatenate(question: str, rewrites: list[str]) -> str:
    """The search string of §3.1: q' = (q + q'1) + ... + (q + q'l); the question alone when
    there is no rewrite."""
    return " ".join(f"{question} {r}" for r in rewrites) if rewrites else question


class GingerRewriter:
    """Multi-query rewriting: an intermediate answer, then ``n`` rewrites (§3.1, App. B.1).

    Every question, single- or multi-document, gets one sub-query: GINGER does not classify
    (the pipeline's classifier output is recorded but unused here).

    Args:
        llm: the shared LLM.
        cfg: ``n_rewrites`` (3, App. B.1), ``query_mode`` (``fuse`` or ``concatenate``),
            ``max_question_tokens``.
        rewriter_cfg: ``max_new_tokens`` (reply budget of each call) and ``max_length_ratio``
            (length check of a rewrite) of the ``[rewriter]`` table.
    """

    name = "ginger"

    def __init__(self, llm: LLM, cfg: GingerConfig, rewriter_cfg: RewriterConfig):
        self.llm = llm
        self.cfg = cfg
        self.rewriter_cfg = rewriter_cfg

    def retriever(self, retriever: Retriever) -> Retriever:
        """Its plans filter nothing: ``retriever`` itself."""
        return retriever

    def plan(self, questions: list[str], types: list[QuestionType]) -> list[QueryPlan]:
        """One QueryPlan per question. Never raises for LLM trouble (a failed call is a
        recorded fallback, like junk output)."""
        count = self.llm.count_tokens
        capped = [cap_tokens(q, self.cfg.max_question_tokens, count) for q in questions]
        max_tokens = self.rewriter_cfg.max_new_tokens
        answers = self.llm.chat_many(
            [[{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": ANSWER_USER.format(query=q)}]
             for q, _ in capped], max_tokens=min(max_tokens, answer_max_tokens(self.cfg.answer_words)), temperature=0.0)
        fallbacks: list[list[str]] = [[] for _ in questions]
        raw: list[dict[str, str]] = [{} for _ in questions]
        usable: list[str] = []
        for i, (reply, (_, cut)) in enumerate(zip(answers, capped)):
            if cut:
                fallbacks[i].append(f"rewrite: question cut to {self.cfg.max_question_tokens} tokens for the LLM")
            if isinstance(reply, LLMError):
                fallbacks[i].append(f"answer: llm error: {reply}")
                usable.append("")
                continue
            raw[i]["answer"] = reply
            words = reply.split()
            if not words:
                fallbacks[i].append("answer: empty")
            usable.append(" ".join(words[:self.cfg.answer_words]))
        n = self.cfg.n_rewrites
        rewrites = self.llm.chat_many(
            [[{"role": "system", "content": REWRITE_SYSTEM},
              {"role": "user", "content": REWRITE_USER.format(n=n, query=q, answer=a) + REWRITES_FORMAT.format(n=n)}]
             for (q, _), a in zip(capped, usable)], max_tokens=max_tokens * n, temperature=0.0,
            schema=rewrites_schema(n, max_tokens))
        plans = []
        for i, (q, t, reply) in enumerate(zip(questions, types, rewrites)):
            found: list[str] = []
            if isinstance(reply, LLMError):
                fallbacks[i].append(f"rewrites: llm error: {reply}")
            else:
                raw[i]["rewrites"] = reply
                found, rejected = parse_rewrites_reply(reply, q, self.cfg.n_rewrites, answer=usable[i],
                                                 max_length_ratio=self.rewriter_cfg.max_length_ratio)
                if len(found) < self.cfg.n_rewrites:
                    why = f" (rejected: {', '.join(rejected)})" if rejected else ""
                    fallbacks[i].append(f"rewrites: {len(found)} of {self.cfg.n_rewrites} usable{why}")
            if self.cfg.query_mode == "concatenate":
                text = concatenate(q, found)
                sub = SubQuery(text=q, sparse=text, dense=text)
            else:
                sub = SubQuery(text=q, sparse=q, dense=q, extra=found)
            plans.append(QueryPlan(question_type=t, rewriter=self.name, sub_queries=[sub],
                                   fallbacks=fallbacks[i], llm_outputs=raw[i]))
        return plans
