"""Corpus → passages: sentence-boundary, token-bounded chunking (PreQRAG §2.3).

The paper used LlamaIndex's sentence splitter with chunks of up to 512 tokens. Here the
well-kept ``semantic-text-splitter`` (Rust) splits at the largest semantic unit that fits
— paragraphs, then Unicode sentence boundaries, then words — with the capacity counted
in tokens of the embedder's own tokenizer.
"""

from __future__ import annotations


from .records import Passage


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
        return self._splitter

    def split(self, doc_id: str, text: str) -> list[Passage]:
        """Passages of one document, positions 0..n-1; an empty document gives ``[]``."""
        chunks = [c for c in self._load().chunks(text) if c.strip()]
        return [Passage(id=f"{doc_id}#{i}", doc_id=doc_id, position=i, text=c) for i, c in enumerate(chunks)]
