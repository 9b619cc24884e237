"""Dense index types (issue 11 §3): flat, HNSW, IVF-SQ8 and IVF-PQ built from real passage
vectors, opened memory-mapped, searched with filters, and chosen by ``[index] dense_index``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from preqrag.core.config import ConfigError, IndexConfig, load_config
from preqrag.retrieval.dense import DenseRetriever, build_faiss, factory_string
from conftest import corpus_head


@pytest.fixture(scope="module")
def vectors(small_index):
    """The real unit-norm passage embeddings of the small index (all-MiniLM-L6-v2)."""
    import faiss

    flat = faiss.read_index(str(small_index / "dense.faiss"))
    x = flat.reconstruct_n(0, flat.ntotal)
    assert x.shape[0] >= 60 and np.allclose(np.linalg.norm(x, axis=1), 1, atol=1e-4)
    return x


def _retriever(path, n, cfg):
    return DenseRetriever(path, [f"p{i}" for i in range(n)], encoder=None, cfg=cfg)


def _topk(retriever, queries, k, mask=None):
    return [[int(i[1:]) for i in r.ids] for r in retriever.search_vectors(queries, k, mask)]


CASES = {
    "flat": (IndexConfig(), 1.0),
    "hnsw": (IndexConfig(dense_index="hnsw", hnsw_m=16, hnsw_ef_search=64), 0.95),
    "hnsw-sq8": (IndexConfig(dense_index="hnsw-sq8", hnsw_m=16, hnsw_ef_search=64), 0.9),
    "ivf-sq8": (IndexConfig(dense_index="ivf-sq8", ivf_nprobe=4), 0.9),
    # 4-bit codes: 16 centroids per sub-quantiser need 16 x 39 training rows, which a
    # ~100-passage corpus has; lossy by design, so a lower bar
    "ivf-pq": (IndexConfig(dense_index="ivf-pq", pq_m=48, pq_nbits=4, ivf_nprobe=4), 0.5),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_each_type_recall_against_flat_and_mmap(kind, vectors, tmp_path):
    cfg, floor = CASES[kind]
    n = len(vectors)
    exact = _retriever(tmp_path / "flat.faiss", n, IndexConfig(mmap=False))
    build_faiss(vectors, exact.faiss_path)
    path = tmp_path / f"{kind}.faiss"
    info = build_faiss(vectors, path, cfg)
    assert info["type"] == kind and info["n"] == n and info["dim"] == vectors.shape[1]
    assert info["factory"] == factory_string(kind, n, vectors.shape[1], cfg)
    assert (info["train_size"] > 0) == (kind.startswith("ivf") or kind.endswith("sq8"))  # SQ8: trained ranges
    ann = _retriever(path, n, cfg)  # cfg.mmap is True: opened memory-mapped
    queries = vectors[:40]
    truth, got = _topk(exact, queries, 10), _topk(ann, queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, got)])
    assert recall >= floor, (kind, recall)
    if kind != "ivf-pq":
        assert all(g[0] == i for i, g in enumerate(got))  # a passage's own vector finds it first


@pytest.mark.parametrize("kind", ["flat", "hnsw", "hnsw-sq8", "ivf-sq8"])
def test_filters_only_return_allowed_rows(kind, vectors, tmp_path):
    cfg = CASES[kind][0]
    path = tmp_path / "d.faiss"
    build_faiss(vectors, path, cfg)
    r = _retriever(path, len(vectors), cfg)
    mask = np.zeros(len(vectors), dtype=bool)
    mask[::3] = True
    for row in _topk(r, vectors[:10], 5, mask):
        assert row and all(i % 3 == 0 for i in row)


def test_shards_build_the_same_index_as_one_array(vectors, tmp_path):
    one, sharded = tmp_path / "one.faiss", tmp_path / "sharded.faiss"
    cfg = IndexConfig(dense_index="ivf-sq8", ivf_nprobe=2)
    build_faiss(vectors, one, cfg)
    paths = []
    for j, start in enumerate(range(0, len(vectors), 17)):
        p = tmp_path / f"emb_{j}.npy"
        np.save(p, vectors[start:start + 17])
        paths.append(p)
    build_faiss(paths, sharded, cfg)  # shards memory-mapped from disk, same seeded training sample
    a, b = (_topk(_retriever(p, len(vectors), cfg), vectors[:20], 10) for p in (one, sharded))
    assert a == b


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps (Linux)")
def test_build_keeps_no_vector_file_mapped_while_faiss_trains_and_adds(vectors, tmp_path, monkeypatch):
    """A mapped shard's touched pages count in the build's resident memory while the map lives
    (readahead: a 100,000-row sample kept ~4 GB of a 5M build's files resident): the files are
    mapped only while the training sample's rows are copied."""
    import faiss

    paths = []
    for j, start in enumerate(range(0, len(vectors), 17)):
        paths.append(tmp_path / f"emb_{j}.npy")
        np.save(paths[-1], vectors[start:start + 17])
    mapped_during = []

    def spy(name):
        original = getattr(faiss.IndexIVFScalarQuantizer, name)

        def call(self, *args, **kwargs):
            maps = Path("/proc/self/maps").read_text()
            mapped_during.append((name, sum(str(p) in maps for p in paths)))
            return original(self, *args, **kwargs)
        return call

    for name in ("train", "add"):
        monkeypatch.setattr(faiss.IndexIVFScalarQuantizer, name, spy(name))
    build_faiss(paths, tmp_path / "ivf.faiss", IndexConfig(dense_index="ivf-sq8", ivf_nprobe=2))
    assert {name for name, _ in mapped_during} == {"train", "add"}
    assert all(count == 0 for _, count in mapped_during), mapped_during


def test_config_rejects_unknown_type_and_bad_pq(vectors, tmp_path):
    with pytest.raises(ConfigError, match="dense_index"):
        load_config(None, {"index": {"dense_index": "annoy"}})
    with pytest.raises(ValueError, match="pq_m"):
        build_faiss(vectors, tmp_path / "x.faiss", IndexConfig(dense_index="ivf-pq", pq_m=50))


def test_build_index_records_the_type_and_open_uses_it(small_corpus, test_config, tmp_path):
    from preqrag.index.embedded import Index, build_index

    cfg = test_config.model_copy(update={"index": IndexConfig(dense_index="hnsw", hnsw_m=8)})
    out = tmp_path / "hnsw_index"
    manifest = build_index(corpus_head(small_corpus[0], 6, tmp_path / "corpus.jsonl"), out, cfg)
    assert manifest["dense_index"]["type"] == "hnsw"
    assert json.loads((out / "manifest.json").read_text())["dense_index"]["factory"] == "HNSW8,Flat"
    index = Index.open(out, cfg)
    import faiss

    assert isinstance(index.dense.faiss_index, faiss.IndexHNSW)
    q = small_corpus[2][0]["question"]
    (found,) = index.dense.search([q], 5)
    assert len(found.ids) == 5 and found.scores == sorted(found.scores, reverse=True)
    assert index.sparse.search([q], 5)[0].ids  # BM25 opened memory-mapped still answers


@pytest.mark.parametrize("kind", ["ivf-pq", "hnsw-sq8"])
def test_refine_restores_recall_memory_mapped(kind, vectors, tmp_path):
    """``refine = "flat"`` (FAISS RFlat) over a lossy type (PQ or 8-bit codes): the same candidates
    re-scored with the exact vectors; recall@10 against flat rises to ~1, scores become exact inner
    products, the refined index opens memory-mapped, and filters still apply (in the candidate search)."""
    n = len(vectors)
    exact = _retriever(tmp_path / "flat.faiss", n, IndexConfig(mmap=False))
    build_faiss(vectors, exact.faiss_path)
    base_cfg = CASES[kind][0]
    refined_cfg = base_cfg.model_copy(update={"refine": "flat", "refine_k_factor": 8 if kind == "ivf-pq" else 2})
    build_faiss(vectors, tmp_path / "base.faiss", base_cfg)
    info = build_faiss(vectors, tmp_path / "refined.faiss", refined_cfg)
    assert info["factory"] == factory_string(kind, n, vectors.shape[1], base_cfg) + ",RFlat"
    queries = vectors[:40]
    truth = _topk(exact, queries, 10)
    plain_r = _retriever(tmp_path / "base.faiss", n, base_cfg)
    plain = _topk(plain_r, queries, 10)
    refined_r = _retriever(tmp_path / "refined.faiss", n, refined_cfg)
    refined = _topk(refined_r, queries, 10)

    def recall(got):
        return np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, got)])

    assert recall(refined) >= 0.95 and recall(refined) >= recall(plain)
    if kind == "ivf-pq":  # 4-bit PQ codes lose much of the ranking; HNSW-SQ8's 8-bit codes little
        assert recall(refined) > recall(plain)
    assert all(g[0] == i for i, g in enumerate(refined))  # exact scores: a passage finds itself first

    def exact_scores(ranking):
        return [float(vectors[int(p[1:])] @ queries[0]) for p in ranking.ids]

    top = refined_r.search_vectors(queries[:1], 3)[0]
    assert np.allclose(top.scores, exact_scores(top), atol=1e-5)
    lossy = plain_r.search_vectors(queries[:1], 3)[0]
    assert not np.allclose(lossy.scores, exact_scores(lossy), atol=1e-5)  # the codes' scores, re-scored above
    mask = np.zeros(n, dtype=bool)
    mask[::3] = True
    for row in _topk(refined_r, vectors[:10], 5, mask):
        assert row and all(i % 3 == 0 for i in row)
    for exact_type in ("flat", "hnsw"):  # they score with the float32 vectors already: refused at load ...
        with pytest.raises(ConfigError, match="index.refine"):
            load_config(None, {"index": {"dense_index": exact_type, "refine": "flat"}})
        with pytest.raises(ValueError, match="refine"):  # ... and by the build, whatever built the settings
            factory_string(exact_type, n, vectors.shape[1],
                           IndexConfig(dense_index=exact_type).model_copy(update={"refine": "flat"}))


def test_flat_index_written_from_shards_equals_faiss_own_file(tmp_path):
    """The flat index is written straight from the vector shards (peak memory one shard): the file is
    byte-identical to faiss.write_index of the same vectors, and searches the same."""
    import faiss

    from preqrag.retrieval.dense import build_faiss

    rng = np.random.default_rng(1)
    shards = [rng.standard_normal((n, 24)).astype(np.float32) for n in (7, 0, 13, 5)]
    for i, s in enumerate(shards):
        np.save(tmp_path / f"emb_{i:05d}.npy", s)
    paths = [tmp_path / f"emb_{i:05d}.npy" for i in range(len(shards))]
    info = build_faiss(paths, tmp_path / "dense.faiss")
    assert info["factory"] == "Flat" and info["n"] == 25 and info["dim"] == 24
    ref = faiss.IndexFlatIP(24)
    ref.add(np.concatenate(shards))
    faiss.write_index(ref, str(tmp_path / "ref.faiss"))
    assert (tmp_path / "dense.faiss").read_bytes() == (tmp_path / "ref.faiss").read_bytes()
    got = faiss.read_index(str(tmp_path / "dense.faiss"), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
    q = rng.standard_normal((3, 24)).astype(np.float32)
    assert np.array_equal(got.search(q, 5)[1], ref.search(q, 5)[1])
    assert not (tmp_path / "dense.faiss.tmp").exists()


@pytest.mark.parametrize("kind", ["ivf-pq", "hnsw-sq8"])
def test_refined_index_written_from_shards_equals_faiss_own_file(kind, tmp_path, monkeypatch):
    """refine = "flat": the IVF or HNSW part is built in memory, the exact vectors are streamed from
    the shards into the file (no float32 copy in memory); the file is byte-identical to
    faiss.write_index of FAISS's own IndexRefineFlat over the same vectors added shard by shard, and
    searches the same. So is the in-memory fallback for a FAISS that writes refine files otherwise."""
    import faiss

    from preqrag.retrieval.dense import _refine_layout

    _refine_layout(16, 800)  # this FAISS's layout is the known one: the streamed path runs, not the fallback
    rng = np.random.default_rng(2)
    shards = [rng.standard_normal((n, 16)).astype(np.float32) for n in (400, 0, 300, 100)]
    shards = [s / np.linalg.norm(s, axis=1, keepdims=True) if len(s) else s for s in shards]
    paths = []
    for i, s in enumerate(shards):
        paths.append(tmp_path / f"emb_{i:05d}.npy")
        np.save(paths[-1], s)
    cfg, factory, base_params = {
        "ivf-pq": (IndexConfig(dense_index="ivf-pq", pq_m=4, pq_nbits=4, ivf_nlist=4, refine="flat", train_size=1000),
                   "IVF4,PQ4x4,RFlat", faiss.SearchParametersIVF(nprobe=32)),
        "hnsw-sq8": (IndexConfig(dense_index="hnsw-sq8", hnsw_m=4, hnsw_ef_construction=16, refine="flat",
                                 train_size=1000, refine_k_factor=2),
                     "HNSW4,SQ8,RFlat", faiss.SearchParametersHNSW(efSearch=128)),
    }[kind]
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # HNSW inserts on several threads are not deterministic
    try:
        info = build_faiss(paths, tmp_path / "dense.faiss", cfg)
        assert info["factory"] == factory and info["n"] == 800
        ref = faiss.index_factory(16, factory, faiss.METRIC_INNER_PRODUCT)
        if kind == "hnsw-sq8":
            faiss.downcast_index(ref.base_index).hnsw.efConstruction = 16
        x = np.concatenate(shards)
        ref.train(x)  # train_size >= n: the sample is every row, in order
        for s in shards:  # HNSW's graph depends on the insert batches: the build adds shard by shard
            ref.add(s)
        faiss.write_index(ref, str(tmp_path / "ref.faiss"))
        assert (tmp_path / "dense.faiss").read_bytes() == (tmp_path / "ref.faiss").read_bytes()
        got = _retriever(tmp_path / "dense.faiss", 800, cfg)  # memory-mapped, as served
        params = faiss.IndexRefineSearchParameters(k_factor=float(cfg.refine_k_factor), base_index_params=base_params)
        want = ref.search(x[:5], 5, params=params)[1]
        assert _topk(got, x[:5], 5) == want.tolist()
        assert not (tmp_path / "dense.faiss.tmp").exists()

        import preqrag.retrieval.dense as dense_module

        def other_layout(*_):
            raise RuntimeError("unexpected FAISS refine index layout")

        monkeypatch.setattr(dense_module, "_refine_layout", other_layout)  # a FAISS that writes IxRF otherwise
        build_faiss(paths, tmp_path / "fallback.faiss", cfg)  # FAISS's own in-memory build: the same file
        assert (tmp_path / "fallback.faiss").read_bytes() == (tmp_path / "ref.faiss").read_bytes()
    finally:
        faiss.omp_set_num_threads(threads)


@pytest.mark.parametrize("kind", ["hnsw-sq8", "hnsw-sq8+refine", "ivf-sq8", "ivf-pq+refine"])
def test_interrupted_build_resumes_from_its_checkpoint_to_the_same_file(kind, vectors, tmp_path, monkeypatch):
    """A build that dies after some shards resumes from ``<path>.checkpoint``: training kept, only
    the remaining shards added, HNSW's level generator replayed; with one FAISS thread the file is
    byte-identical to an uninterrupted build's. A checkpoint of other settings or other vectors is
    not used."""
    import faiss

    cfg = {"hnsw-sq8": IndexConfig(dense_index="hnsw-sq8", hnsw_m=4, hnsw_ef_construction=16),
           "hnsw-sq8+refine": IndexConfig(dense_index="hnsw-sq8", hnsw_m=4, hnsw_ef_construction=16, refine="flat"),
           "ivf-sq8": IndexConfig(dense_index="ivf-sq8", ivf_nlist=2),
           # 8 sub-quantizers (not 48): PQ training, single-threaded here, is most of the case's time
           "ivf-pq+refine": IndexConfig(dense_index="ivf-pq", pq_m=8, pq_nbits=4, ivf_nlist=1, refine="flat")}[kind]
    paths = []
    for j, start in enumerate(range(0, len(vectors), 9)):
        paths.append(tmp_path / f"emb_{j:05d}.npy")
        np.save(paths[-1], vectors[start:start + 9])
    assert len(paths) >= 6
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # HNSW inserts on several threads are not deterministic
    try:
        whole = tmp_path / "whole.faiss"
        assert "resumed" not in build_faiss(paths, whole, cfg, checkpoint_seconds=None)

        real_load, reads = np.load, []

        def dies_on_the_fifth_shard(file, *args, **kwargs):
            if kwargs.get("mmap_mode") is None and Path(file) in paths:
                reads.append(file)
                if len(reads) == 5:
                    raise OSError("worker lost")
            return real_load(file, *args, **kwargs)

        out = tmp_path / "dense.faiss"
        monkeypatch.setattr(np, "load", dies_on_the_fifth_shard)
        with pytest.raises(OSError, match="worker lost"):
            build_faiss(paths, out, cfg, checkpoint_seconds=0)  # a checkpoint after every shard
        monkeypatch.setattr(np, "load", real_load)
        checkpoint, state = tmp_path / "dense.faiss.checkpoint", tmp_path / "dense.faiss.checkpoint.json"
        assert not out.exists() and checkpoint.exists() and json.loads(state.read_text())["rows"] == 4 * 9

        other = cfg.model_copy(update={"train_size": cfg.train_size + 1})  # other settings: built afresh
        assert "resumed" not in build_faiss(paths, tmp_path / "other.faiss", other, checkpoint_seconds=0)
        (tmp_path / "other.faiss.checkpoint").write_bytes(checkpoint.read_bytes())
        (tmp_path / "other.faiss.checkpoint.json").write_text(state.read_text())
        np.save(paths[-1], -vectors[len(vectors) - len(np.load(paths[-1])):])  # same shapes, other vectors
        assert "resumed" not in build_faiss(paths, tmp_path / "other.faiss", cfg, checkpoint_seconds=0)
        np.save(paths[-1], vectors[9 * (len(paths) - 1):])

        seen = []
        info = build_faiss(paths, out, cfg, checkpoint_seconds=0, progress=lambda *a: seen.append(a))
        assert info["resumed"]["rows"] == 4 * 9 and info["n"] == len(vectors)
        assert seen[0] == ("dense index", 4 * 9, len(vectors)) and seen[-1] == ("dense index", len(vectors), len(vectors))
        assert [d for _, d, _ in seen] == sorted({d for _, d, _ in seen}) and len(seen) == len(paths) - 4 + 1
        assert out.read_bytes() == whole.read_bytes()
        assert not checkpoint.exists() and not state.exists()
    finally:
        faiss.omp_set_num_threads(threads)
