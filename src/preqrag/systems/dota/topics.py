"""Namespaces for DoTA-RAG routing: WebOrganizer's 24 topics, assigned to documents offline.

DoTA-RAG (Ruangtanusak et al., SIGIR 2025 LiveRAG, §2.2 and Appendix C) keeps one Pinecone
namespace per WebOrganizer topic (Wettig et al. 2025, "Organize the Web", arXiv 2502.10341):
every FineWeb document was tagged with WebOrganizer's 24-label ``TopicClassifier`` and the
router searches only the top-2 voted namespaces.

Here a namespace is a *facet* of the passages of an index: ``topics.npz`` beside the index
holds one topic id per passage row. Assignment (a stated deviation, docs/preset-dota.md): that
classifier is a hub model (``WebOrganizer/TopicClassifier``), so offline each **document** is
given the topic whose description (:data:`TOPICS`, WebOrganizer's own taxonomy text) is most
similar, by cosine, to the document's embedding with the index's embedder; a document's
embedding is the normalised mean of its passages' vectors, read back from the FAISS index (no
re-encoding). All passages of a document share its topic, as a document lives in one
namespace in the paper.

Parts (not in the paper; docs/preset-dota.md, deviations): each topic namespace is split into up to
``parts_per_topic`` parts by spherical k-means of its passage vectors (FAISS ``Kmeans``), each
with its centroid. Labels from a labeller that is not the router leave a question's gold document
in a topic the votes do not name (gold in the two voted namespaces: 0.60 on the smoke set); the
router (:func:`choose_parts`) searches the parts nearest the question instead, the voted topics'
parts first, up to a share of the passages (``[dota] route_budget``). A document's passages keep
their document's topic; its parts may differ (each passage goes to its nearest part).

``topics.npz`` is written atomically (temp file + ``os.replace``) on first use
(:func:`load_topics`) or by ``python -m preqrag.systems.dota.topics --index IDX``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...retrieval.facets import register_facet

TOPICS: dict[str, str] = {
    "Adult Content": "",
    "Art & Design": "Includes: architecture",
    "Software Development": "Includes: algorithms, coding, and web development",
    "Crime & Law": "Includes: law enforcement. For financial crime and litigation, choose 'Finance & Business' "
                   "instead. For social issues and the legislative process, choose 'Politics & Social Issues' "
                   "instead",
    "Education & Jobs": "Includes: pedagogy, training & certification, academia. If the page is educational "
                        "about a specific topic, e.g. food or mathematics, choose that topic instead",
    "Electronics & Hardware": "Includes: computer hardware, phones, televisions, other consumer electronics",
    "Entertainment": "Includes: music, movies, TV shows, videos, celebrities, humor, nightlife. If the page "
                     "discusses music or film as art rather than entertainment, choose 'Art & Design' instead",
    "Social Life": "Includes: family, friends, relationships, community. If the article focuses on a specific "
                   "social activity (e.g. sports or board games), choose the topic of the activity instead",
    "Fashion & Beauty": "Includes: clothing, accessories, cosmetics",
    "Finance & Business": "Includes: taxes, regulations, investments, insurance, credit cards, personal "
                          "finance, corporate communication, marketing, human resources",
    "Food & Dining": "Includes: recipes, groceries, beverages, restaurants. For nutritional science, choose "
                     "'Health' instead",
    "Games": "Includes: video games, board games, gambling",
    "Health": "Includes: medicine, wellness, mental health, veterinary science, nutritional science. For "
              "health insurance, choose 'Finance & Business' instead",
    "History & Geography": "Includes: archaeology",
    "Home & Hobbies": "Includes: real estate, renting, relocation, furniture, applicanes, home improvement, DIY, "
                      "gardening, pets, toys, collecting",
    "Industrial": "Topics related to mining, agriculture, manufacturing, utilities and construction. Includes: "
                  "raw materials, industrial goods, chemicals, textiles. For general business topics or "
                  "business finance, choose 'Finance & Business' instead",
    "Literature": "Includes: literary criticism, linguistics, philosophy, related subjects in the humanities. "
                  "For text written in literary style, choose the topic of the contents instead",
    "Politics": "Includes: social issues, political campaigns, the legislative process, geopolitics, protests, "
                "activism",
    "Religion": "Includes: spirituality",
    "Science, Math & Technology": "Includes: physics, chemistry, biology, environmental science, mathematics, "
                                  "statistics, biotech, engineering",
    "Software": "Topics related to the use of software and the internet",
    "Sports & Fitness": "Includes: martial arts, motor sports, outdoor activities, sports equipment",
    "Transportation": "Includes: cars and other vehicles, taxis, public transportation, traffic, commuting, "
                      "aviation, rail, shipping, logistics",
    "Travel & Tourism": "Includes: hospitality, hotels, sight-seeing, cruises. For detailed descriptions of "
                        "tourist destinations, choose 'History & Geography' instead",
}
"""WebOrganizer's 24 topics → description, in WebOrganizer's label order (the topic id is
the position). Names and descriptions verbatim from the WebOrganizer repository,
``define_domains/taxonomies/topics.yaml`` (CodeCreator/WebOrganizer @ 87b50f3), the definitions
its LLM annotators and its TopicClassifier were trained with; the bullet lines are joined
with '. ' (and the repository's typo "applicanes" kept)."""

TOPIC_NAMES: list[str] = list(TOPICS)
"""The namespace names offered to the router (DoTA-RAG Fig. 4 ``{choices_str}``)."""

FACET = "topic"
"""Facet name of the namespaces in ``SubQuery.filters`` and on the dense retriever."""

FILE = "topics.npz"
"""Topic assignment file inside the index directory."""

METHOD = "embedding-similarity"
"""How :func:`assign_topics` assigns topics (recorded in the file)."""

PART_FACET = "namespace"
"""Facet name of the parts of the topic namespaces (values ``"<topic> #<j>"``, e.g. ``"Health #3"``):
what a routed plan's filters name (``{"namespace": [...]}``)."""

PARTS_PER_TOPIC = 8
"""Default parts per topic namespace (``[dota] route_parts``). Measured on the bench index (49,642
passages, 200 dev questions, docs/bench/dota_routing.json): with 8 parts the nearest parts hold the
gold documents far more often than whole topics at the same share searched."""

KMEANS_POINTS_PER_CENTROID = 39
"""FAISS's minimum training points per centroid: a topic with fewer than ``39 * k`` passages gets
fewer parts (``len // 39``, at least one)."""


def topic_text(name: str) -> str:
    """The text embedded for topic ``name``: ``"<name>. <description>"`` (the name alone for
    'Adult Content', which has no description)."""
    desc = TOPICS[name]
    return f"{name}. {desc}" if desc else name


@dataclass
class TopicAssignment:
    """Topic of every passage row of an index.

    Attributes:
        names: topic names; ``labels`` index into it.
        labels: ``int16`` array of shape ``(n_passages,)``, the topic id of each passage row.
        method: how it was made (:data:`METHOD`).
        embedder: the embedder whose vectors were compared.
        part_names: names of the parts of the topics (``"<topic> #<j>"``); ``parts`` index into it.
        parts: ``int32`` array of shape ``(n_passages,)``, the part of each passage row.
        part_topic: ``int16`` array of shape ``(n_parts,)``, the topic id of each part.
        centroids: ``float32`` array of shape ``(n_parts, dim)``, unit-norm centroid of each part.
        parts_per_topic: the most parts a topic was split into.
    """

    names: list[str]
    labels: np.ndarray
    method: str
    embedder: str
    part_names: list[str]
    parts: np.ndarray
    part_topic: np.ndarray
    centroids: np.ndarray
    parts_per_topic: int

    def part_sizes(self) -> np.ndarray:
        """Share of the passages in each part, ``float64`` of shape ``(n_parts,)``."""
        n = max(len(self.parts), 1)
        return np.bincount(self.parts, minlength=len(self.part_names)) / n

    def counts(self) -> dict[str, int]:
        """Passages per topic (topics with none included, as 0)."""
        c = np.bincount(self.labels, minlength=len(self.names))
        return {n: int(c[i]) for i, n in enumerate(self.names)}

    def fraction(self, topics: list[str]) -> float:
        """Share of the index's passages in ``topics`` (the search cost of a routed query,
        relative to searching everything). Unknown names count for nothing."""
        ids = [self.names.index(t) for t in topics if t in self.names]
        return float(np.isin(self.labels, ids).mean()) if len(self.labels) else 0.0


def assign_topics(index, parts_per_topic: int = PARTS_PER_TOPIC) -> TopicAssignment:
    """Assign a WebOrganizer topic to every document of an opened index, and split each topic
    into parts.

    Each document's vector is the normalised mean of its passages' vectors (read back from
    the FAISS index with ``reconstruct_n``); its topic is the argmax of the cosine
    similarity to the embedded :func:`topic_text` of each topic (encoded as queries, since a
    topic description plays the query's role). Then each topic's passage vectors are
    clustered by spherical k-means (FAISS ``Kmeans``, 20 iterations, seed 1) into
    ``min(parts_per_topic, n // 39)`` parts (at least one). No passage is re-encoded.

    Args:
        index: a :class:`preqrag.index.embedded.Index` with a dense index.
        parts_per_topic: the most parts per topic (``[dota] route_parts``, default 8).

    Raises:
        ValueError: the index has no dense index (nothing to compare with).
    """
    if index.dense is None or index.encoder is None:
        raise ValueError(f"{index.path}: DoTA topic routing needs a dense index (built without --sparse-only)")
    import faiss

    faiss_index = index.dense.faiss_index
    vectors = faiss_index.reconstruct_n(0, faiss_index.ntotal)
    doc_ids = [index.passages[pid].doc_id for pid in index.passage_ids]
    uniq, doc_of_row = np.unique(np.asarray(doc_ids, dtype=object), return_inverse=True)
    doc_vecs = np.zeros((len(uniq), vectors.shape[1]), dtype=np.float32)
    np.add.at(doc_vecs, doc_of_row, vectors)
    doc_vecs /= np.maximum(np.linalg.norm(doc_vecs, axis=1, keepdims=True), 1e-12)
    topic_vecs = index.encoder.encode([topic_text(n) for n in TOPIC_NAMES], is_query=True)
    doc_topic = np.argmax(doc_vecs @ np.asarray(topic_vecs, dtype=np.float32).T, axis=1)
    labels = doc_topic[doc_of_row].astype(np.int16)

    parts = np.zeros(len(labels), dtype=np.int32)
    part_names: list[str] = []
    part_topic: list[int] = []
    centroids: list[np.ndarray] = []
    for t, name in enumerate(TOPIC_NAMES):
        rows = np.flatnonzero(labels == t)
        if not len(rows):
            continue
        v = np.ascontiguousarray(vectors[rows], dtype=np.float32)
        k = max(1, min(parts_per_topic, len(rows) // KMEANS_POINTS_PER_CENTROID))
        if k == 1:
            c, assign = v.mean(axis=0, keepdims=True), np.zeros(len(rows), dtype=np.int64)
        else:
            km = faiss.Kmeans(v.shape[1], k, niter=20, seed=1, spherical=True)
            km.train(v)
            c = km.centroids
            assign = km.index.search(v, 1)[1][:, 0]
        parts[rows] = len(part_names) + assign
        part_names += [f"{name} #{j + 1}" for j in range(k)]
        part_topic += [t] * k
        centroids.append(c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12))
    return TopicAssignment(TOPIC_NAMES, labels, METHOD, index.encoder.name, part_names, parts,
                           np.asarray(part_topic, dtype=np.int16),
                           np.vstack(centroids).astype(np.float32), parts_per_topic)


def choose_parts(scores: np.ndarray, sizes: np.ndarray, budget: float) -> list[int]:
    """The parts a routed question searches: in order of ``scores`` (best first), each added
    while the passages searched stay within ``budget`` (a share of all passages); the best part
    is always searched, and a part too large for what is left is skipped for smaller ones.

    Args:
        scores: ``(n_parts,)`` routing scores of one question (:func:`part_scores`).
        sizes: ``(n_parts,)`` share of the passages in each part (:meth:`TopicAssignment.part_sizes`).
        budget: the most of the passages to search, in (0, 1] (``[dota] route_budget``).

    Returns:
        part ids, best first.
    """
    chosen: list[int] = []
    used = 0.0
    for p in np.argsort(-scores, kind="stable"):
        if sizes[p] <= 0:
            continue
        if not chosen or used + sizes[p] <= budget + 1e-12:
            chosen.append(int(p))
            used += float(sizes[p])
    return chosen


def part_scores(a: TopicAssignment, query_vectors: np.ndarray, votes: list[dict[str, float]],
                bm25_parts: list[list[int]], vote_weight: float) -> np.ndarray:
    """Routing scores of every part for a batch of questions, ``(n_questions, n_parts)``:
    the cosine of the question's vector with the part's centroid, plus ``1 / rank`` for every
    passage of the part among the question's BM25 top passages (``bm25_parts``: their parts,
    in rank order), plus ``vote_weight`` times the share of the LLM votes that named the part's
    topic (``votes``: topic name → share of valid votes; DoTA-RAG §2.2's self-consistency tally)."""
    s = np.asarray(query_vectors, dtype=np.float32) @ a.centroids.T
    topic_of = {n: i for i, n in enumerate(a.names)}
    for i, (share, ranked) in enumerate(zip(votes, bm25_parts)):
        for name, v in share.items():
            if name in topic_of:
                s[i, a.part_topic == topic_of[name]] += vote_weight * v
        for rank, p in enumerate(ranked):
            s[i, p] += 1.0 / (rank + 1)
    return s


def _save(path: Path, a: TopicAssignment) -> None:
    """Write ``a`` to ``path`` atomically (:func:`preqrag.core.io.atomic_write`)."""
    from ...core.io import atomic_write

    atomic_write(path, lambda fh: np.savez(fh, labels=a.labels, names=np.asarray(a.names),
                                           method=np.asarray(a.method), embedder=np.asarray(a.embedder),
                                           part_names=np.asarray(a.part_names), parts=a.parts,
                                           part_topic=a.part_topic, centroids=a.centroids,
                                           parts_per_topic=np.asarray(a.parts_per_topic)))


def _read(path: Path) -> TopicAssignment:
    with np.load(path, allow_pickle=False) as z:
        return TopicAssignment([str(n) for n in z["names"]], z["labels"].astype(np.int16), str(z["method"]),
                               str(z["embedder"]), [str(n) for n in z["part_names"]], z["parts"].astype(np.int32),
                               z["part_topic"].astype(np.int16), z["centroids"].astype(np.float32),
                               int(z["parts_per_topic"]))


def _facet_source(values_key: str, labels_key: str):
    """A :data:`preqrag.retrieval.facets.FacetSource` of ``<index>/topics.npz`` that reads only
    the facet's two arrays: the ``topic`` facet (``names``, ``labels``) or the ``namespace``
    facet of the parts (``part_names``, ``parts``)."""
    def source(index_dir: Path, n_rows: int) -> tuple[list[str], np.ndarray]:
        path = Path(index_dir) / FILE
        try:
            with np.load(path, allow_pickle=False) as z:
                values, labels = [str(v) for v in z[values_key]], z[labels_key].astype(np.int32)
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"{path}: no readable topic assignment ({e}); run `preqrag topics --index "
                             f"{index_dir}` or the dota preset, which writes it") from None
        if len(labels) != n_rows:
            raise ValueError(f"{path}: {len(labels)} passages, the index has {n_rows}; run "
                             f"`preqrag topics --index {index_dir} --rebuild`")
        return values, labels
    return source


register_facet(FACET, FILE, _facet_source("names", "labels"))
register_facet(PART_FACET, FILE, _facet_source("part_names", "parts"))


def load_topics(index, *, rebuild: bool = False, parts_per_topic: int = PARTS_PER_TOPIC) -> TopicAssignment:
    """The topic assignment of ``index``: read from ``<index>/topics.npz``, or made with
    :func:`assign_topics` and written there atomically when missing, stale (another number
    of passages, another embedder, another taxonomy, another ``parts_per_topic``, or a file
    without parts) or ``rebuild``.

    Raises:
        ValueError: no dense index (see :func:`assign_topics`).
    """
    path = Path(index.path) / FILE
    if path.exists() and not rebuild:
        try:
            a = _read(path)
            if (len(a.labels) == len(index.passage_ids) and a.names == TOPIC_NAMES
                    and a.embedder == getattr(index.encoder, "name", None) and a.parts_per_topic == parts_per_topic):
                return a
        except (OSError, ValueError, KeyError):
            pass  # unreadable or from another version: rebuild below
    a = assign_topics(index, parts_per_topic)
    _save(path, a)
    return a


def main(argv: list[str] | None = None) -> int:
    """``python -m preqrag.systems.dota.topics --index IDX [--config CFG] [--rebuild]``: assign the
    topics of an index (written to ``<IDX>/topics.npz``) and print passages per topic as JSON."""
    from ...core.config import ConfigError, load_config
    from ...index.embedded import Index, IndexOpenError

    p = argparse.ArgumentParser(prog="python -m preqrag.systems.dota.topics", description=main.__doc__)
    p.add_argument("--index", required=True, type=Path)
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--rebuild", action="store_true", help="Reassign even if topics.npz is up to date.")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config)
        a = load_topics(Index.open(args.index, cfg), rebuild=args.rebuild, parts_per_topic=cfg.dota.route_parts)
    except (ConfigError, IndexOpenError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"index": str(args.index), "file": str(args.index / FILE), "method": a.method,
                      "embedder": a.embedder, "n_passages": int(len(a.labels)), "passages_per_topic": a.counts(),
                      "parts": len(a.part_names)},
                     indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
