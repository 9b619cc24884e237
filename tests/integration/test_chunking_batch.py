"""Batched chunking (``Chunker.split_many``) equals one ``Chunker.split`` per document, with the
real tokenizers of the bundled embedders (MiniLM's WordPiece and WordLlama's BPE), on smoke
documents, their paragraphs, texts cut to a token count around the capacity, and texts with
edge whitespace (Python's ``str.strip`` removes U+001C..U+001F, the splitter's trim does not)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from _bench import BENCH
from preqrag.index.chunking import Chunker


def _tokenizers():
    from preqrag.models.files import resolve

    out = {"minilm": Tokenizer.from_file(str(Path(resolve("sentence-transformers/all-MiniLM-L6-v2").location)
                                             / "tokenizer.json"))}
    try:
        import wordllama

        out["wordllama"] = Tokenizer.from_file(
            str(Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    except ImportError:
        pass
    return out


@pytest.fixture(scope="module")
def docs():
    with gzip.open(os.path.join(BENCH, "smoke_corpus.jsonl.gz"), "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh][:60]


@pytest.mark.parametrize("name", ["minilm", "wordllama"])
def test_split_many_equals_split(docs, name):
    toks = _tokenizers()
    if name not in toks:
        pytest.skip('needs pip install "wordllama==0.4.0.post1"')
    tok = toks[name]
    cap = 64
    texts = list(docs) + [p for d in docs[:20] for p in d.split("\n") if p.strip()][:300]
    long = docs[0] + " " + docs[1]
    enc = tok.encode(long, add_special_tokens=False)
    for n in range(cap - 3, cap + 4):  # exactly around the capacity
        texts.append(long[: enc.offsets[n - 1][1]])
        texts.append("  " + long[: enc.offsets[n - 1][1]] + "\n\n")
    texts += ["", "   ", "\x1c", "\x1c short text \x1f", "\u3000 ideographic space \u3000", "\t tab \r\n"]
    chunker = Chunker(tok, cap, overlap_tokens=0)
    docs_in = [(f"d{i}", t) for i, t in enumerate(texts)]
    batched = chunker.split_many(docs_in)
    one_by_one = [chunker.split(d, t) for d, t in docs_in]
    assert batched == one_by_one
    assert sum(len(b) > 1 for b in batched) > 20 and sum(len(b) == 1 for b in batched) > 100
    assert chunker.split_many([]) == []
