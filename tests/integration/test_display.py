"""How `preqrag demo` and `preqrag ask` show an answer (preqrag.cli.display): [n] markers on the
sentences a passage supports (the bundled cross-encoder's calibrated attribution), each document
once, the seconds it took."""

from __future__ import annotations

import re

import pytest

from preqrag.cli.display import cited_answer, format_answer

P1 = ("Moss spreads on lawns by spores carried by wind and water, and by fragments of moss that "
      "break off and root where they land, mostly in shaded and damp parts of the lawn.")
P2 = "The town council meets on the first Monday of every month in the old library building."
P3 = "Raking out moss in spring spreads the fragments further unless they are collected."


@pytest.fixture(scope="module")
def attributor():
    from preqrag.components.citations import load_attributor

    return load_attributor()


def _record(answer: str) -> dict:
    return {"id": "q", "question": "How does moss spread on lawns?", "answer": answer,
            "passages": [{"passage": P1, "doc_IDs": ["<urn:a>"]}, {"passage": P2, "doc_IDs": ["<urn:b>"]},
                         {"passage": P3, "doc_IDs": ["<urn:a>"]}]}


def test_supported_sentences_get_markers_and_documents_are_listed_once(attributor):
    answer = "Moss spreads by spores carried by wind and water. The weather was nice today in Paris."
    shown = format_answer(_record(answer), 7.94, attributor)
    lines = shown.splitlines()
    assert lines[0] == "Q: How does moss spread on lawns?"
    a = lines[1]
    assert re.match(r"A: Moss spreads by spores carried by wind and water\. \[1(, 3)?\] The weather", a), a
    assert a.endswith("Paris.")  # an unsupported sentence has no marker
    assert lines[2] == "   sources: [1,3] <urn:a>"  # a document once, with all its passage numbers
    assert lines[3] == "   also in the prompt: [2] <urn:b>"
    assert lines[4] == "   7.9 s"


def test_an_answer_that_cites_is_shown_as_written(attributor):
    answer = "Moss spreads by spores [1]. Raking spreads fragments [3]."
    text, cited = cited_answer(answer, [P1, P2, P3], attributor)
    assert (text, cited) == (answer, {1, 3})
    shown = format_answer(_record(answer), None, attributor)
    assert "sources: [1,3] <urn:a>" in shown and " s\n" not in shown
    # on one line, like an attributed answer, also when the model wrote paragraphs or a list
    listed = "Two ways:\n\n[1] Moss spreads by spores.\n2. Raking spreads fragments [3]."
    shown = format_answer(_record(listed), None, attributor).splitlines()
    assert shown[1] == "A: Two ways: [1] Moss spreads by spores. 2. Raking spreads fragments [3]."
    assert shown[2].startswith("   sources: ")


def test_without_an_attributor_the_documents_are_still_listed_once():
    shown = format_answer(_record("Some answer."), 1.0, None)
    assert "A: Some answer.\n" in shown and "passages from: [1,3] <urn:a>; [2] <urn:b>" in shown


def test_answer_time_is_the_batch_wall_time_and_says_so():
    from preqrag.cli.display import answer_time, format_answer

    trace = {"seconds": {"rerank": 0.25, "generate": 2.0},
             "batches": {"rerank": {"size": 4, "seconds": 1.0}, "generate": {"size": 4, "seconds": 8.0}}}
    assert answer_time(trace) == (9.0, 4)
    assert answer_time({"seconds": {"generate": 3.0}}) == (3.0, 1)  # a trace from before batches were recorded
    rec = {"question": "q?", "answer": "a.", "passages": [{"passage": "p", "doc_IDs": ["d1"]}]}
    assert "   9.0 s, answered together with 3 other questions (2.2 s per question)" in format_answer(rec, 9.0, None, 4)
    assert format_answer(rec, 3.0).rstrip().endswith("   3.0 s")
