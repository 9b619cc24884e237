"""The indexes: the embedded index (``embedded``: bm25s + FAISS files), its passage store
(``passages``) and chunking (``chunking``), shard builds and merges (``shards``), the Milvus
backend (``milvus``) and the one entry point that opens either (``backends``)."""
