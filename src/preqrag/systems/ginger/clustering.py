"""Clustering a question's nuggets into facets (UiS-IAI@LiveRAG §3.2; GINGER uses BERTopic).

* ``agglomerative`` (default): scikit-learn ``AgglomerativeClustering`` with average linkage on
  cosine distance and a distance threshold (``[ginger] cluster_distance_threshold``, 0.5), over
  the nuggets' embeddings from the index's embedder. No number of clusters to guess, and
  deterministic for the 2-30 nuggets of one question.
* ``bertopic``: BERTopic (Grootendorst 2022) with the authors' settings (``clustering.py`` of
  iai-group/ginger-response-generation: UMAP n_neighbors=50, n_components=2, min_dist=0.01;
  HDBSCAN min_cluster_size=2, min_samples=1; CountVectorizer 1-2-grams, English stopwords), on the
  same precomputed embeddings, so no embedding model is downloaded. Needs ``pip install
  bertopic`` (not a dependency). As in the authors' code, fewer than 4 nuggets are not
  clustered (each is its own cluster); HDBSCAN outliers (topic -1) become one cluster each.

Labels are renumbered 0, 1, … in order of first appearance.
"""

from __future__ import annotations

import numpy as np

BERTOPIC_MIN_NUGGETS = 4
"""The authors cluster only when a question has at least 4 nuggets (``main.py``)."""


def _renumber(labels) -> list[int]:
    seen: dict[int, int] = {}
    return [seen.setdefault(int(x), len(seen)) for x in labels]


def embed_texts(texts: list[str], encoder=None) -> np.ndarray:
    """Unit-norm vectors of ``texts`` (``float32``, shape ``(n, dim)``): the index embedder's
    passage embeddings, or TF-IDF vectors when there is no embedder (a BM25-only index)."""
    if encoder is not None:
        return np.asarray(encoder.encode(texts, is_query=False), dtype=np.float32)
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        m = TfidfVectorizer().fit_transform(texts).toarray().astype(np.float32)
    except ValueError:  # empty vocabulary
        m = np.zeros((len(texts), 1), dtype=np.float32)
    return m


def cluster_agglomerative(embeddings: np.ndarray, threshold: float) -> list[int]:
    """Average-linkage clusters on cosine distance cut at ``threshold``; zero vectors (no
    vocabulary) are each their own cluster."""
    n = len(embeddings)
    if n <= 1:
        return [0] * n
    from sklearn.cluster import AgglomerativeClustering

    norms = np.linalg.norm(embeddings, axis=1)
    labels = np.full(n, -1)
    ok = np.flatnonzero(norms > 0)
    if len(ok) >= 2:
        labels[ok] = AgglomerativeClustering(n_clusters=None, distance_threshold=threshold, metric="cosine",
                                             linkage="average").fit_predict(embeddings[ok])
    elif len(ok) == 1:
        labels[ok] = 0
    nxt = labels.max() + 1
    for i in np.flatnonzero(labels < 0):
        labels[i] = nxt
        nxt += 1
    return _renumber(labels)


def cluster_bertopic(texts: list[str], embeddings: np.ndarray) -> list[int]:
    """BERTopic topics with the authors' settings (see the module docstring).

    Raises:
        ImportError: bertopic (or umap-learn / hdbscan) is not installed.
    """
    n = len(texts)
    if n < BERTOPIC_MIN_NUGGETS:
        return list(range(n))
    from bertopic import BERTopic
    from hdbscan import HDBSCAN
    from sklearn.feature_extraction.text import CountVectorizer
    from umap import UMAP

    umap = UMAP(n_neighbors=min(50, n - 1), n_components=2, min_dist=0.01, random_state=42,
                init="random" if n <= 10 else "spectral")
    model = BERTopic(umap_model=umap, hdbscan_model=HDBSCAN(min_cluster_size=2, min_samples=1, prediction_data=True),
                     vectorizer_model=CountVectorizer(ngram_range=(1, 2), stop_words="english"),
                     embedding_model=None, language="english", calculate_probabilities=False, verbose=False)
    topics, _ = model.fit_transform(texts, embeddings=embeddings)
    nxt = max(topics) + 1
    out = []
    for t in topics:
        if t == -1:
            out.append(nxt)
            nxt += 1
        else:
            out.append(t)
    return _renumber(out)


def cluster_nuggets(texts: list[str], embeddings: np.ndarray, method: str = "agglomerative",
                    threshold: float = 0.5) -> tuple[list[int], str | None]:
    """Cluster labels of ``texts`` (one per text, renumbered by first appearance).

    Returns:
        ``(labels, fallback)``: ``fallback`` names why ``bertopic`` fell back to
        ``agglomerative`` (not installed, or it failed on these few nuggets), else ``None``.
    """
    if method == "bertopic":
        try:
            return cluster_bertopic(texts, embeddings), None
        except ImportError as e:
            why = f"clustering: bertopic not installed ({e}); agglomerative used"
        except (ValueError, TypeError) as e:  # UMAP/HDBSCAN/vectorizer on degenerate input
            why = f"clustering: bertopic failed ({type(e).__name__}: {e}); agglomerative used"
        return cluster_agglomerative(embeddings, threshold), why
    return cluster_agglomerative(embeddings, threshold), None
