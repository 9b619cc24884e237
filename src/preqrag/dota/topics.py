"""Namespaces for DoTA-RAG routing: WebOrganizer's 24 topics, assigned to documents offline.

DoTA-RAG (Ruangtanusak et al., SIGIR 2025 LiveRAG, §2.2 and Appendix C) keeps one Pinecone
namespace per WebOrganizer topic (Wettig et al. 2025, "Organize the Web", arXiv 2502.10341):
every FineWeb document was tagged with WebOrganizer's 24-label ``TopicClassifier`` and the
router searches only the top-2 voted namespaces.

Here a namespace is a *facet* of the passages of an index: ``topics.npz`` beside the index
holds one topic id per passage row. Assignment (a stated deviation, docs/presets.md): that
classifier is a hub model (``WebOrganizer/TopicClassifier``), so offline each **document** is
given the topic whose description (:data:`TOPICS`, WebOrganizer's own taxonomy text) is most
similar, by cosine, to the document's embedding with the index's embedder; a document's
embedding is the normalised mean of its passages' vectors, read back from the FAISS index (no
re-encoding). All passages of a document share its topic, as a document lives in one
namespace in the paper.

``topics.npz`` is written atomically (temp file + ``os.replace``) on first use
(:func:`load_topics`) or by ``python -m preqrag.dota.topics --index IDX``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
    """

    names: list[str]
    labels: np.ndarray
    method: str
    embedder: str

    def counts(self) -> dict[str, int]:
        """Passages per topic (topics with none included, as 0)."""
        c = np.bincount(self.labels, minlength=len(self.names))
        return {n: int(c[i]) for i, n in enumerate(self.names)}

    def fraction(self, topics: list[str]) -> float:
        """Share of the index's passages in ``topics`` (the search cost of a routed query,
        relative to searching everything). Unknown names count for nothing."""
        ids = [self.names.index(t) for t in topics if t in self.names]
        return float(np.isin(self.labels, ids).mean()) if len(self.labels) else 0.0


def assign_topics(index) -> TopicAssignment:
    """Assign a WebOrganizer topic to every document of an opened index.

    Each document's vector is the normalised mean of its passages' vectors (read back from
    the FAISS ``IndexFlatIP`` with ``reconstruct_n``); its topic is the argmax of the cosine
    similarity to the embedded :func:`topic_text` of each topic (encoded as queries, since a
    topic description plays the query's role). Cost: one matrix product, no passage is
    re-encoded.

    Args:
        index: a :class:`preqrag.index.Index` with a dense index.

    Raises:
        ValueError: the index has no dense index (nothing to compare with).
    """
    if index.dense is None or index.encoder is None:
        raise ValueError(f"{index.path}: DoTA topic routing needs a dense index (built without --sparse-only)")
    faiss_index = index.dense._load()
    vectors = faiss_index.reconstruct_n(0, faiss_index.ntotal)
    doc_ids = [index.passages[pid].doc_id for pid in index.passage_ids]
    uniq, doc_of_row = np.unique(np.asarray(doc_ids, dtype=object), return_inverse=True)
    doc_vecs = np.zeros((len(uniq), vectors.shape[1]), dtype=np.float32)
    np.add.at(doc_vecs, doc_of_row, vectors)
    doc_vecs /= np.maximum(np.linalg.norm(doc_vecs, axis=1, keepdims=True), 1e-12)
    topic_vecs = index.encoder.encode([topic_text(n) for n in TOPIC_NAMES], is_query=True)
    doc_topic = np.argmax(doc_vecs @ np.asarray(topic_vecs, dtype=np.float32).T, axis=1)
    return TopicAssignment(TOPIC_NAMES, doc_topic[doc_of_row].astype(np.int16), METHOD, index.encoder.name)


def _save(path: Path, a: TopicAssignment) -> None:
    """Write ``a`` to ``path`` atomically (:func:`preqrag.io.atomic_write`)."""
    from ..io import atomic_write

    atomic_write(path, lambda fh: np.savez(fh, labels=a.labels, names=np.asarray(a.names),
                                           method=np.asarray(a.method), embedder=np.asarray(a.embedder)))


def _read(path: Path) -> TopicAssignment:
    with np.load(path, allow_pickle=False) as z:
        return TopicAssignment([str(n) for n in z["names"]], z["labels"].astype(np.int16), str(z["method"]),
                               str(z["embedder"]))


def load_topics(index, *, rebuild: bool = False) -> TopicAssignment:
    """The topic assignment of ``index``: read from ``<index>/topics.npz``, or made with
    :func:`assign_topics` and written there atomically when missing, stale (another number
    of passages, another embedder, another taxonomy) or ``rebuild``.

    Raises:
        ValueError: no dense index (see :func:`assign_topics`).
    """
    path = Path(index.path) / FILE
    if path.exists() and not rebuild:
        try:
            a = _read(path)
            if (len(a.labels) == len(index.passage_ids) and a.names == TOPIC_NAMES
                    and a.embedder == getattr(index.encoder, "name", None)):
                return a
        except (OSError, ValueError, KeyError):
            pass  # unreadable or from another version: rebuild below
    a = assign_topics(index)
    _save(path, a)
    return a


def main(argv: list[str] | None = None) -> int:
    """``python -m preqrag.dota.topics --index IDX [--config CFG] [--rebuild]``: assign the
    topics of an index (written to ``<IDX>/topics.npz``) and print passages per topic as JSON."""
    from ..config import ConfigError, load_config
    from ..index import Index, IndexOpenError

    p = argparse.ArgumentParser(prog="python -m preqrag.dota.topics", description=main.__doc__)
    p.add_argument("--index", required=True, type=Path)
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--rebuild", action="store_true", help="Reassign even if topics.npz is up to date.")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config)
        a = load_topics(Index.open(args.index, cfg), rebuild=args.rebuild)
    except (ConfigError, IndexOpenError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"index": str(args.index), "file": str(args.index / FILE), "method": a.method,
                      "embedder": a.embedder, "n_passages": int(len(a.labels)), "passages_per_topic": a.counts()},
                     indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
