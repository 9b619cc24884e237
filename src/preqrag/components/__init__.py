"""The components: the component registry (``registry``: one registry per pipeline slot,
``register``, ``Context``) and the default stage implementations every system may use: the
classifiers (``classifiers/``), the ``none`` rewriter (``rewriting``), fusion (``fusion/``), the
cross-encoder rerank step (``reranking``), citations, given candidates, sentence selection, and
the grounded-answer and extractive generators (``generation``, ``answering``)."""
