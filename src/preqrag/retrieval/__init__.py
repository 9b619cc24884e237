"""First-stage retrievers over an index: BM25 (bm25s) and dense (FAISS exact inner product)."""

from .bm25 import BM25Retriever
from .dense import DenseRetriever

__all__ = ["BM25Retriever", "DenseRetriever"]
