"""Strict parsing of LLM rewrites and the fallback paths (junk output, failing LLM, an unreachable
server). The bundled SmolLM2's real rewrites: tests/integration/test_rewriting_smollm2.py."""


import pytest

from preqrag.core.config import LLMConfig, RewriterConfig
from preqrag.systems.preqrag.rewriting import (PreQRAGRewriter, parse_rewrite, parse_rewrite_reply, parse_sub_questions,
                               parse_sub_questions_reply)
from preqrag.core.contracts import LLMError
from fakes import FakeLLMBase

Q = "I'm developing new methods for protein analysis and wondering what improvements are made to HDX methodology?"
MULTI = "How does Azure Firewall enable network segmentation, and what are the compliance aspects of Key Vault?"


@pytest.mark.parametrize("reply, expected", [
    ("Query: HDX methodology improvements protein analysis", ("HDX methodology improvements protein analysis", None)),
    ('"HDX methodology improvements"\nextra chatter', ("HDX methodology improvements", None)),
    ("", (None, "empty")),
    ("   \n  ", (None, "empty")),
    ("?!?", (None, "unparsable")),
    ("protein " * 60, (None, "too long")),
    ("Recent advancements in wood slice table care", (None, "unrelated")),
])
def test_parse_rewrite(reply, expected):
    assert parse_rewrite(reply, Q, max_length_ratio=3.0) == expected


def test_parse_sub_questions():
    reply = "Here you go:\n1. How does Azure Firewall enable network segmentation?\n2) What are Key Vault compliance aspects?\n3. extra"
    subs, reason = parse_sub_questions(reply, MULTI, n=2, max_length_ratio=3.0)
    assert reason is None
    assert subs == ["How does Azure Firewall enable network segmentation?", "What are Key Vault compliance aspects?"]
    assert parse_sub_questions("Azure Firewall segmentation and Key Vault", MULTI, 2, 3.0) == (None, "unparsable")
    assert parse_sub_questions("1. Azure Firewall?\n1. Azure Firewall?", MULTI, 2, 3.0) == (None, "unparsable")
    assert parse_sub_questions("", MULTI, 2, 3.0) == (None, "empty")
    assert parse_sub_questions("1. Why is the sky blue?\n2. Who won the cup?", MULTI, 2, 3.0) == (None, "unrelated")


class JunkLLM(FakeLLMBase):
    """An LLM that misbehaves: every reply is junk (stands in for a broken model)."""

    name = "junk"

    replies = ["", "!!!", "word " * 500]
    i = 0

    def chat_many(self, requests, *, max_tokens, temperature=0.0, schema=None, **options):
        # ignores the schema, like a backend that does not enforce it; junk in call order
        out = []
        for _ in requests:
            out.append(self.replies[self.i] if self.i < len(self.replies) else "???")
            self.i += 1
        return out


def test_junk_llm_falls_back_to_original_question():
    rw = PreQRAGRewriter(JunkLLM(), RewriterConfig())
    single, multi = rw.plan([Q, MULTI], ["single", "multi"])
    assert single.sub_queries[0].sparse == Q and single.sub_queries[0].dense == Q
    assert single.fallbacks == ["sparse: empty", "dense: unparsable JSON: Expecting value at char 0"]
    assert [s.text for s in multi.sub_queries] == [MULTI]
    assert multi.fallbacks == ["decompose: unparsable JSON: Expecting value at char 0"]  # 500 words, no JSON


def test_unreachable_llm_server_falls_back_and_records_error():
    """A real connection failure (nothing listens on the port) after the client's retries."""
    import socket

    from preqrag.models.llm import load_llm

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = load_llm(LLMConfig(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model="x",
                             max_retries=1, timeout_s=2))
    with pytest.raises(LLMError, match="APIConnectionError"):
        llm.chat([{"role": "user", "content": "hi"}], max_tokens=4)
    (plan,) = PreQRAGRewriter(llm, RewriterConfig()).plan([MULTI], ["multi"])
    assert plan.sub_queries[0].text == MULTI
    assert plan.fallbacks[0].startswith("decompose: llm error: openai backend")


def test_parse_structured_replies():
    assert parse_rewrite_reply('{"query": "HDX methodology protein systems"}', "sparse", Q, 3.0) == (
        "HDX methodology protein systems", None)
    assert parse_rewrite_reply('{"question": "Why is the sky blue?"}', "dense", Q, 3.0) == (None, "unrelated")
    assert parse_rewrite_reply('{"query": "HDX', "sparse", Q, 3.0)[1].startswith("unparsable JSON")
    assert parse_rewrite_reply('{"other": "HDX"}', "sparse", Q, 3.0) == (None, "unparsable: no 'query' field")
    two = '{"sub_questions": ["How does Azure Firewall segment networks?", "What are Key Vault compliance aspects?"]}'
    assert parse_sub_questions_reply(two, MULTI, 2, 3.0)[0] == [
        "How does Azure Firewall segment networks?", "What are Key Vault compliance aspects?"]
    same = '{"sub_questions": ["Azure Firewall?", "azure firewall?"]}'
    assert parse_sub_questions_reply(same, MULTI, 2, 3.0) == (None, "repeated sub-questions")
    assert parse_sub_questions_reply('{"sub_questions": []}', MULTI, 2, 3.0) == (None, "fewer than two sub-questions")


def test_adaptive_sub_question_count_asks_for_as_many_as_the_question_holds():
    """``n_sub_questions = "adaptive"``: the sub-question count is the question's estimated parts
    (3 for a question with three; the fixed setting gives 2). It raised ModuleNotFoundError before."""
    three = "What is SCADA, how does a PLC work, and why do plants use HMIs?"
    rw = PreQRAGRewriter(JunkLLM(), RewriterConfig(n_sub_questions="adaptive"))
    assert rw._n_sub(three) == 3 and rw._n_sub(MULTI) >= 2
    assert PreQRAGRewriter(JunkLLM(), RewriterConfig())._n_sub(three) == 2
