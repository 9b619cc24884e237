"""Corpus → passages: sentence-boundary, token-bounded chunking (PreQRAG §2.3).

The paper used LlamaIndex's sentence splitter with chunks of up to 512 tokens. Here the
well-kept ``semantic-text-splitter`` (Rust) splits at the largest semantic unit that fits
— paragraphs, then Unicode sentence boundaries, then words — with the capacity counted
in tokens of the embedder's own tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.records import Passage

WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
               "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
"""Unicode White_Space: what the splitter's (Rust ``str::trim``) trimming removes. Python's
``str.strip()`` also removes U+001C..U+001F, so it is not used for the same purpose."""


class Chunker:
    """Split documents into passages of at most ``max_tokens`` tokens.

    Args:
        tokenizer: a ``tokenizers.Tokenizer`` (the embedder's).
        max_tokens: capacity per passage in tokens, special tokens excluded.
        overlap_tokens: overlap between consecutive passages.
    """

    def __init__(self, tokenizer, max_tokens: int, overlap_tokens: int = 0):
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self._splitter = None
        self._counter = None

    def _load(self):
        if self._splitter is None:
            try:
                from semantic_text_splitter import TextSplitter
            except ImportError as e:  # pragma: no cover
                raise ImportError('chunking needs: pip install "semantic-text-splitter==0.33.1"') from e
            from tokenizers import Tokenizer

            # A private copy without truncation/padding: a truncating tokenizer would make
            # every long text look short enough and nothing would be split.
            tokenizer = Tokenizer.from_str(self.tokenizer.to_str())
            tokenizer.no_truncation()
            tokenizer.no_padding()
            self._splitter = TextSplitter.from_huggingface_tokenizer(
                tokenizer, capacity=self.max_tokens, overlap=self.overlap_tokens, trim=True)
            self._counter = tokenizer
        return self._splitter

    def split(self, doc_id: str, text: str) -> list[Passage]:
        """Passages of one document, positions 0..n-1; an empty document gives ``[]``."""
        chunks = [c for c in self._load().chunks(text) if c.strip()]
        return [Passage(id=f"{doc_id}#{i}", doc_id=doc_id, position=i, text=c) for i, c in enumerate(chunks)]

    def split_many(self, docs: Sequence[tuple[str, str]]) -> list[list[Passage]]:
        """Passages of several ``(doc_id, text)`` documents; the same as :meth:`split` on each.

        A document that fits in one passage is the whole (trimmed) text, as the splitter returns
        it, so it is only tokenised once, in one batch call of the Rust tokenizer (all cores);
        the longer ones go through the splitter's ``chunk_all`` (parallel as well). For corpora of
        short documents (the scale corpora of bench/scale.py, many FineWeb pages) this is several
        times faster than one ``split`` per document. Equality with :meth:`split` is tested,
        around the capacity too (tests/integration/test_chunking_batch.py).
        """
        if not docs:
            return []
        splitter = self._load()
        texts = [t for _, t in docs]
        encode = getattr(self._counter, "encode_batch_fast", None) or self._counter.encode_batch  # no offsets
        counts = [len(e.ids) for e in encode(texts, add_special_tokens=False)]
        long = [i for i, n in enumerate(counts) if n > self.max_tokens]
        chunked = dict(zip(long, splitter.chunk_all([texts[i] for i in long]))) if long else {}
        out = []
        for i, (doc_id, text) in enumerate(docs):
            chunks = chunked[i] if i in chunked else [text.strip(WHITE_SPACE)]
            chunks = [c for c in chunks if c.strip()]
            out.append([Passage(id=f"{doc_id}#{j}", doc_id=doc_id, position=j, text=c) for j, c in enumerate(chunks)])
        return out
