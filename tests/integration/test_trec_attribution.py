"""Sentence attribution (preqrag.components.citations) on real smoke text with the bundled
cross-encoder: reference answers cite their gold documents' passages."""

from pathlib import Path


def test_attribution_on_real_smoke_text(small_index, small_corpus):
    """Reference answers of real smoke questions, attributed to the passages of their gold
    documents and of unrelated documents: citations go to gold passages."""
    import pyarrow.parquet as pq

    from preqrag.components.citations import load_attributor, split_sentences

    by_doc: dict[str, list[tuple[str, str]]] = {}
    for row in pq.read_table(Path(small_index) / "passages.parquet").to_pylist():
        by_doc.setdefault(row["doc_id"], []).append((row["id"], row["text"]))
    questions = [q for q in small_corpus[2] if q["n_gold"] == 1]
    gold_all = {g for q in small_corpus[2] for g in q["gold_doc_ids"]}
    others = [d for d in by_doc if d not in gold_all][:2]  # distractors: two unrelated documents
    attributor = load_attributor()
    items, labels = [], []
    for q in questions:
        cands = [c for d in [*q["gold_doc_ids"], *others] for c in by_doc[d]]
        items.append((split_sentences(q["answer"]), [t for _, t in cands]))
        labels.append([pid.rsplit("#", 1)[0] in q["gold_doc_ids"] for pid, _ in cands])
    cited = attributor.attribute_many(items)
    flat = [labels[i][j] for i, per_sent in enumerate(cited) for cs in per_sent for j in cs]
    assert flat, "no sentence was attributed"
    assert sum(flat) / len(flat) >= 0.8  # precision against the gold document
    assert sum(any(labels[i][j] for cs in per_sent for j in cs) for i, per_sent in enumerate(cited)) >= len(questions) - 1
