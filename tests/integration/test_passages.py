"""The memory-mapped passage store (issue 11 §2): same passages as the Parquet file, found by
id through the hash lookup, nothing loaded per passage at open."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

import preqrag.index.passages as passages_mod
from preqrag.index.embedded import Index
from preqrag.index.passages import ARROW, LOOKUP, PassageStore


def test_store_matches_parquet_and_finds_every_id(small_index):
    rows = pq.read_table(small_index / "passages.parquet").to_pylist()
    store = PassageStore(small_index)
    assert store.memory_mapped and (small_index / ARROW).exists() and (small_index / LOOKUP).exists()
    assert len(store) == len(rows) and list(store.ids) == [r["id"] for r in rows]
    for i, r in enumerate(rows):
        assert store.row(r["id"]) == i
        p = store[r["id"]]
        assert (p.id, p.doc_id, p.position, p.text) == (r["id"], r["doc_id"], r["position"], r["text"])
    assert [p.id for p in store.values()] == [r["id"] for r in rows]
    assert store.ids[:3] == [r["id"] for r in rows[:3]] and store.ids[-1] == rows[-1]["id"]
    for missing in ("nope#0", rows[0]["id"] + "x", 7):
        assert missing not in store
        with pytest.raises(KeyError):
            store[missing]


def test_index_uses_the_store_and_old_indexes_still_open(small_index, test_config, tmp_path):
    index = Index.open(small_index, test_config)
    assert isinstance(index.passages, PassageStore)
    pid = index.passage_ids[5]
    assert index.text(pid) == index.passages[pid].text
    old = tmp_path / "old_index"
    shutil.copytree(small_index, old)
    (old / ARROW).unlink()
    (old / LOOKUP).unlink()
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["files"]  # an index of that time recorded no files either
    (old / "manifest.json").write_text(json.dumps(manifest))
    legacy = Index.open(old, test_config)  # built before the store: read from passages.parquet
    assert not legacy.passages.memory_mapped and legacy.passages[pid] == index.passages[pid]
    q = "solar energy"
    assert legacy.sparse.search([q], 5)[0].ids == index.sparse.search([q], 5)[0].ids


def test_hash_collisions_resolve_by_id(small_index, monkeypatch, tmp_path):
    """Every id hashing to the same value: the lookup still returns the right row."""
    monkeypatch.setattr(passages_mod, "id_hash", lambda pid: 42)
    d = tmp_path / "idx"
    d.mkdir()
    shutil.copy(small_index / "passages.parquet", d / "passages.parquet")
    passages_mod.write_store(d / "passages.parquet", d)
    store = PassageStore(d)
    ids = list(store.ids)
    assert all(store.row(pid) == i for i, pid in enumerate(ids))
    assert "nope#0" not in store
