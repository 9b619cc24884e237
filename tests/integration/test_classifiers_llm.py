"""The LLM question classifiers (PreQRAG §2.1) with the real bundled SmolLM2-135M in-process: every
reply parses (choice-constrained), none falls back. Their parsing and fallbacks with a fake LLM:
tests/unit/components/test_classifiers.py."""

from __future__ import annotations


def test_llm_and_combined_classifiers_with_the_real_bundled_llm():
    """SmolLM2-135M in-process: every question gets a valid class; a fallback is recorded, never guessed."""
    from preqrag.components.classifiers import load_classifier
    from preqrag.core.config import load_config

    questions = ["What is the boiling point of water at sea level?",
                 "How do welding positions and hand techniques compare for optimal welding results?"]
    for name in ("llm", "combined"):
        cfg = load_config(None, {"classifier": {"name": name}})
        out = load_classifier(cfg).classify(questions)
        assert len(out) == 2 and all(c.classifier == name for c in out)
        # the reply is constrained to the choice single|multi: it always parses, no fallback
        assert [c.fallback for c in out] == [None, None]
        if name == "combined":
            assert out[1].question_type == "multi"  # the rules fire on "compare": OR keeps multi
