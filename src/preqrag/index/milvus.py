"""A Milvus index backend: passages, a BM25 full-text function and dense vectors in one collection.

The embedded index (bm25s + FAISS files in a directory, :class:`preqrag.index.embedded.Index`) serves one
machine. This backend serves the same retrieval from a Milvus deployment — a cluster, a
standalone server, or **Milvus Lite** (``pip install "preqrag[milvus]"``; a local ``.db`` file,
started by pymilvus itself: the same client API a cluster serves). It is selected in the TOML::

    [index]
    backend = "milvus"
    uri = "http://milvus.example.org:19530"   # or a local Milvus Lite file: "./liverag.db"
    collection = "liverag"
    token_env = "MILVUS_TOKEN"                # token read from this environment variable, if set

and loaded with ``preqrag index --backend milvus --index IDX`` from an embedded index (its passages
and its dense vectors, so the corpus is encoded once), in batches, resumably.

Collection schema (one row per passage):

=============  ======================  ===============================================================
field          type                    content
=============  ======================  ===============================================================
``row``        INT64, primary key      row of the passage in the embedded index it came from
``passage_id`` VARCHAR(512)            ``"{doc_id}#{position}"``
``doc_id``     VARCHAR(512)            source document id
``position``   INT64                   passage position in its document
``text``       VARCHAR, analyzer on    passage text (input of the BM25 function)
``sparse``     SPARSE_FLOAT_VECTOR     output of the ``BM25`` Function (``SPARSE_INVERTED_INDEX``)
``dense``      FLOAT_VECTOR(dim)       unit-norm embedding, metric ``IP`` (``[milvus] dense_index``)
=============  ======================  ===============================================================

The collection's ``preqrag.manifest`` property holds the manifest (embedder name and model sha256, passage
count, source index), checked at open exactly as :meth:`Index.open` checks an embedded index.

BM25 here is Milvus's: its ``standard`` analyzer lowercases and splits on Unicode word
boundaries but neither stems nor removes stop words (bm25s here uses English stop words and the
Snowball stemmer), and Milvus computes the document frequencies itself; the two rankings are
therefore close but not equal (docs/milvus.md gives the measured difference on the dev sample).
Milvus Lite 3.2.2 reports BM25 scores as negative distances where a Milvus server reports them
positive; both order best first, and the retriever returns the (non-negative) score.

Not available on this backend (refused with a clear error before the first question):
metadata filters in dense search (DoTA-RAG's namespace routing) and anything that walks every
passage of the index (``preqrag train-encoder``'s passage list, DoTA topic assignment).
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.records import Passage, Ranking
from ..core.contracts import HYBRID_SEARCH, FilterUnsupported, Filters

INSTALL_HINT = 'the milvus backend needs pymilvus (and milvus-lite for a local file): pip install "preqrag[milvus]"'
MAX_VARCHAR = 65535
"""Milvus's largest VARCHAR (bytes): a longer passage text is refused at load (never cut silently)."""


class MilvusError(ValueError):
    """The Milvus backend cannot serve this configuration (missing collection, wrong embedder...)."""


def _pymilvus():
    try:
        import pymilvus
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise MilvusError(INSTALL_HINT) from e
    return pymilvus


def connect(cfg) -> Any:
    """A ``pymilvus.MilvusClient`` for ``cfg.index`` (``uri``; token from ``token_env`` if set).

    A ``uri`` that is a path (no ``scheme://``) is a Milvus Lite database file; pymilvus starts
    Milvus Lite for it (a few seconds).

    Raises:
        MilvusError: ``[index] uri`` is empty, or pymilvus is not installed.
    """
    ic = cfg.index
    if not ic.uri:
        raise MilvusError('[index] backend = "milvus" needs [index] uri (a Milvus URL such as '
                          '"http://host:19530", or a Milvus Lite file such as "./liverag.db")')
    pm = _pymilvus()
    kwargs = {}
    token = os.environ.get(ic.token_env) if ic.token_env else None
    if token:
        kwargs["token"] = token
    uri = ic.uri
    if "://" not in uri:
        uri = str(Path(uri).expanduser().resolve())
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    try:
        return pm.MilvusClient(uri=uri, **kwargs)
    except pm.MilvusException as e:
        raise MilvusError(f"cannot connect to Milvus at {ic.uri}: {e}") from e


def disconnect(client, cfg) -> None:
    """Close ``client``; for a Milvus Lite file also stop the in-process Milvus Lite server, which
    holds the file's lock until then (another process — a ``preqrag run`` — could not open it)."""
    client.close()
    if "://" not in cfg.index.uri:
        try:
            from milvus_lite.server_manager import server_manager_instance
        except ImportError:  # pragma: no cover
            return
        server_manager_instance.release_server(str(Path(cfg.index.uri).expanduser().resolve()))


def _schema(client, dim: int):
    pm = _pymilvus()
    DataType = pm.DataType
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("row", DataType.INT64, is_primary=True)
    s.add_field("passage_id", DataType.VARCHAR, max_length=512)
    s.add_field("doc_id", DataType.VARCHAR, max_length=512)
    s.add_field("position", DataType.INT64)
    s.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR, enable_analyzer=True)
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    s.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    s.add_function(pm.Function(name="bm25", function_type=pm.FunctionType.BM25,
                               input_field_names=["text"], output_field_names=["sparse"]))
    return s


MANIFEST_PROPERTY = "preqrag.manifest"
"""Collection property holding the manifest (JSON). A property, not the description: Milvus Lite
3.2.2 drops collection descriptions."""


def _manifest_of(client, collection: str) -> dict:
    props = client.describe_collection(collection).get("properties") or {}
    try:
        return json.loads(props[MANIFEST_PROPERTY])
    except (KeyError, json.JSONDecodeError) as e:
        raise MilvusError(f"Milvus collection {collection!r} was not created by preqrag (no valid "
                          f"{MANIFEST_PROPERTY!r} property)") from e


def rows_in(client, collection: str) -> int:
    """Rows in a collection (``count(*)``)."""
    (row,) = client.query(collection, filter="", output_fields=["count(*)"])
    return int(row["count(*)"])


def _batches(index, batch_rows: int, start: int) -> Iterator[tuple[int, list[Passage], np.ndarray]]:
    """(first row, passages, unit-norm float32 vectors) of the embedded ``index``, from ``start``."""
    faiss_index = index.dense.faiss_index
    n = len(index.passage_ids)
    for lo in range(start, n, batch_rows):
        hi = min(n, lo + batch_rows)
        passages = [index.passages.at(r) if hasattr(index.passages, "at") else index.passages[index.passage_ids[r]]
                    for r in range(lo, hi)]
        yield lo, passages, faiss_index.reconstruct_n(lo, hi - lo).astype(np.float32)


def load_collection(index_dir: str | Path, cfg, *, batch_rows: int = 1000, overwrite: bool = False,
                    progress=None) -> dict:
    """Load an embedded index's passages and dense vectors into the Milvus collection of ``cfg``.

    Memory: one batch (``batch_rows`` passages and vectors). Resumable: rows are upserted in row
    order, one batch per request, keyed by their row; a re-run on the same collection counts the
    rows it holds (``count(*)``) and continues from the last whole batch, and a row written again
    replaces itself (upsert), so nothing is duplicated.
    The vectors are the index's own (FAISS ``reconstruct_n``), so the corpus is not re-encoded.

    Args:
        index_dir: an embedded index built by ``preqrag index`` with a flat or HNSW dense index
            (their vectors are stored exactly; IVF-SQ8/PQ vectors are lossy and refused).
        cfg: the configuration; ``cfg.index`` names uri, collection and token.
        batch_rows: passages per upsert.
        overwrite: drop an existing collection of that name first.
        progress: optional callable ``(rows_done, rows_total)``.

    Returns:
        The manifest stored with the collection (plus ``seconds``).

    Raises:
        MilvusError: a BM25-only or IVF index, a passage longer than Milvus's VARCHAR limit, or an
            existing collection loaded from another index (use ``overwrite``).
    """
    from .embedded import Index

    t0 = time.perf_counter()
    index_dir = Path(index_dir)
    embedded = Index.open(index_dir, cfg.model_copy(update={"index": cfg.index.model_copy(
        update={"backend": "embedded"})}))
    if embedded.dense is None:
        raise MilvusError(f"{index_dir} is a BM25-only index: the Milvus collection needs its dense vectors")
    kind = embedded.manifest.get("dense_index", {}).get("type", "flat")
    if kind not in ("flat", "hnsw"):  # hnsw-sq8 and the IVF types keep quantised codes only
        raise MilvusError(f"{index_dir} has a lossy {kind} dense index: its vectors cannot be read back exactly; "
                          "build an index with [index] dense_index = \"flat\" to load into Milvus")
    n = len(embedded.passage_ids)
    dim = embedded.dense.faiss_index.d
    manifest = {"preqrag": 1, "source_index": str(index_dir.resolve()), "n_passages": n, "dim": dim,
                "embedder": embedded.manifest["embedder"], "dense_index": cfg.index.milvus_dense_index,
                "bm25": "milvus standard analyzer (no stemming, no stop words)"}
    client = connect(cfg)
    name = cfg.index.collection
    if overwrite and client.has_collection(name):
        client.drop_collection(name)
    if client.has_collection(name):
        have = _manifest_of(client, name)
        if have.get("source_index") != manifest["source_index"] or have.get("embedder") != manifest["embedder"]:
            raise MilvusError(f"Milvus collection {name!r} holds another index ({have.get('source_index')}); "
                              "pass --overwrite to replace it, or name another [index] collection")
    else:
        params = client.prepare_index_params()
        params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        dense_params = {"M": cfg.index.hnsw_m, "efConstruction": cfg.index.hnsw_ef_construction} \
            if cfg.index.milvus_dense_index == "HNSW" else {}
        params.add_index("dense", index_type=cfg.index.milvus_dense_index, metric_type="IP", params=dense_params)
        client.create_collection(name, schema=_schema(client, dim), index_params=params,
                                 properties={MANIFEST_PROPERTY: json.dumps(manifest)})
    done = rows_in(client, name)
    # rows are upserted in row order, one batch per request: the rows present are 0..done-1 (a count that lags
    # behind, as with a cluster's bounded consistency, only makes the next run upsert a few rows again)
    if done < n:
        done -= done % batch_rows
    for lo, passages, vectors in _batches(embedded, batch_rows, done):
        rows = []
        for i, (p, v) in enumerate(zip(passages, vectors)):
            if len(p.text.encode("utf-8")) > MAX_VARCHAR:
                raise MilvusError(f"passage {p.id} is {len(p.text.encode('utf-8'))} bytes, over Milvus's VARCHAR "
                                  f"limit of {MAX_VARCHAR}: rebuild the index with a smaller [chunking] max_tokens")
            rows.append({"row": lo + i, "passage_id": p.id, "doc_id": p.doc_id, "position": p.position,
                         "text": p.text, "dense": v.tolist()})
        client.upsert(name, rows)
        done = lo + len(rows)
        if progress:
            progress(done, n)
    client.flush(name)
    disconnect(client, cfg)
    manifest["seconds"] = round(time.perf_counter() - t0, 3)
    return manifest


class _Cache(OrderedDict):
    """Bounded LRU of passages seen in search results (so reranking does not query per passage)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def put(self, p: Passage) -> None:
        self[p.id] = p
        self.move_to_end(p.id)
        while len(self) > self.size:
            self.popitem(last=False)


def _passage(entity: dict) -> Passage:
    return Passage(id=entity["passage_id"], doc_id=entity["doc_id"], position=int(entity["position"]),
                   text=entity["text"])


FIELDS = ["passage_id", "doc_id", "position", "text"]


class MilvusPassages(Mapping):
    """Passages of a Milvus collection by passage id: a read-only mapping like
    :class:`~preqrag.index.passages.PassageStore`.

    Passages returned by the retrievers are kept in a bounded LRU (``cache_size`` passages), so the
    cross-encoder and the context builder read them without a round trip; others are fetched with
    one ``query`` (``passage_id in [...]``). Iterating every passage is not offered (a cluster
    collection may hold 40 million).
    """

    def __init__(self, client, collection: str, n: int, cache_size: int = 20_000):
        self.client, self.collection, self.n = client, collection, n
        self.cache = _Cache(cache_size)

    def fetch(self, ids: list[str]) -> None:
        """Read the passages of ``ids`` not in the cache with one query."""
        missing = [i for i in dict.fromkeys(ids) if i not in self.cache]
        if not missing:
            return
        expr = "passage_id in " + json.dumps(missing)
        for e in self.client.query(self.collection, filter=expr, output_fields=FIELDS, limit=len(missing)):
            self.cache.put(_passage(e))

    def __getitem__(self, passage_id: str) -> Passage:
        if passage_id not in self.cache:
            self.fetch([passage_id])
        try:
            return self.cache[passage_id]
        except KeyError:
            raise KeyError(passage_id) from None

    def __contains__(self, passage_id) -> bool:
        try:
            self[passage_id]
            return True
        except KeyError:
            return False

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        raise MilvusError("iterating every passage of a Milvus collection is not supported; use an embedded index")


def _rankings(result, cache: _Cache) -> list[Ranking]:
    out = []
    for hits in result:
        ids, scores = [], []
        for h in hits:
            e = h["entity"]
            p = _passage(e)
            cache.put(p)
            ids.append(p.id)
            scores.append(float(h["distance"]))
        out.append(Ranking(ids=ids, scores=scores))
    return out


class MilvusBM25Retriever:
    """BM25 full-text search in the collection (Milvus ``BM25`` Function over ``text``).

    Same contract as :class:`~preqrag.retrieval.BM25Retriever`: one Ranking per query, at most
    ``k`` passages with score > 0, best first. Scores are Milvus's BM25 (its analyzer, its document
    frequencies; k1 = 1.2, b = 0.75, Milvus's defaults), reported non-negative.
    """

    name = "bm25"
    learned_models: tuple[dict[str, str], ...] = ()
    """No model trained on the user's questions (:class:`~preqrag.core.contracts.Retriever`)."""

    def __init__(self, client, collection: str, passages: MilvusPassages):
        self.client, self.collection, self.passages = client, collection, passages

    def search(self, queries: list[str], k: int, filters: Sequence[Filters] | None = None) -> list[Ranking]:
        """Top-``k`` passages per query by Milvus's BM25 (score > 0, best first). Raises
        FilterUnsupported for a non-empty filter (see :class:`MilvusDenseRetriever`)."""
        if filters and any(filters):
            raise FilterUnsupported("metadata filters are not supported by the milvus backend; use an embedded index")
        if not queries:
            return []
        out = [Ranking() for _ in queries]  # Milvus rejects an empty text; it matches nothing, as in bm25s
        asked = [i for i, q in enumerate(queries) if q.strip()]
        if not asked:
            return out
        res = self.client.search(self.collection, data=[queries[i] for i in asked], anns_field="sparse", limit=k,
                                 output_fields=FIELDS, search_params={"metric_type": "BM25"})
        for i, r in zip(asked, _rankings(res, self.passages.cache)):
            scores = [abs(s) for s in r.scores]  # Milvus Lite: negative distance; server: positive score
            keep = [j for j, s in enumerate(scores) if s > 0]
            out[i] = Ranking(ids=[r.ids[j] for j in keep], scores=[scores[j] for j in keep])
        return out


class MilvusDenseRetriever:
    """Dense search in the collection: the query is encoded here (the index's embedder) and
    searched by inner product on the ``dense`` field. Same contract as
    :class:`~preqrag.retrieval.DenseRetriever` without ``filters`` (refused).
    """

    name = "dense"

    def __init__(self, client, collection: str, passages: MilvusPassages, encoder, batch_size: int = 32,
                 search_params: dict | None = None):
        self.client, self.collection, self.passages = client, collection, passages
        self.encoder, self.batch_size = encoder, batch_size
        self.search_params = search_params or {"metric_type": "IP"}
        self.passages_dim = 0

    @property
    def learned_models(self) -> tuple[dict[str, str], ...]:
        """Its encoder's: a fine-tuned one's identity, else ``()``."""
        return self.encoder.learned_models

    def search_vectors(self, vectors: np.ndarray, k: int, mask=None) -> list[Ranking]:
        if mask is not None:
            raise FilterUnsupported("metadata filters are not supported by the milvus backend; use an embedded index")
        if len(vectors) == 0:
            return []
        res = self.client.search(self.collection, data=[v.tolist() for v in np.asarray(vectors, np.float32)],
                                 anns_field="dense", limit=k, output_fields=FIELDS, search_params=self.search_params)
        return _rankings(res, self.passages.cache)

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The stored vectors of passages ``ids``, shape ``(len(ids), dim)`` float32, in that order.

        Raises:
            KeyError: a passage id not in the collection.
        """
        if not ids:
            return np.zeros((0, int(self.passages_dim)), np.float32)
        uniq = list(dict.fromkeys(ids))
        got = {e["passage_id"]: e["dense"] for e in self.client.query(
            self.collection, filter="passage_id in " + json.dumps(uniq), output_fields=["passage_id", "dense"],
            limit=len(uniq))}
        missing = [i for i in uniq if i not in got]
        if missing:
            raise KeyError(missing[0])
        return np.asarray([got[i] for i in ids], dtype=np.float32)

    def search(self, queries: list[str], k: int, filters: Sequence[Filters] | None = None) -> list[Ranking]:
        """Top-``k`` passages per query by inner product. Raises FilterUnsupported for a
        non-empty filter (namespace facets exist only in embedded indexes)."""
        if filters and any(filters):
            raise FilterUnsupported("metadata filters (DoTA-RAG namespace routing) are not supported by the milvus "
                                    "backend; use an embedded index")
        if not queries:
            return []
        vectors = self.encoder.encode(queries, is_query=True, batch_size=self.batch_size)
        return self.search_vectors(vectors, k)


class MilvusIndex:
    """An opened Milvus collection with the interface of :class:`~preqrag.index.embedded.Index`
    (``passages``, ``text``, ``sparse``, ``dense``, ``encoder``, ``manifest``, ``path``), plus
    :meth:`hybrid_search` (BM25 + dense fused by Milvus's ``RRFRanker`` in one request).

    ``passage_ids`` is ``None``: a collection is not walked passage by passage (capabilities:
    ``hybrid-search`` only; :class:`preqrag.core.contracts.Index`).
    """

    capabilities = frozenset({HYBRID_SEARCH})

    def __init__(self, client, collection: str, manifest: dict, encoder, batch_size: int, cfg=None):
        self.client, self.collection, self.manifest, self.cfg = client, collection, manifest, cfg
        self.path = f"milvus:{collection}"
        self.passage_ids = None
        self.passages = MilvusPassages(client, collection, int(manifest["n_passages"]))
        self.encoder = encoder
        self.sparse = MilvusBM25Retriever(client, collection, self.passages)
        self.dense = MilvusDenseRetriever(client, collection, self.passages, encoder, batch_size)
        self.dense.passages_dim = int(manifest.get("dim", 0))

    def close(self) -> None:
        """Close the connection (:func:`disconnect`: a Milvus Lite file is locked by the process
        that opened it until then)."""
        disconnect(self.client, self.cfg)

    def text(self, passage_id: str) -> str:
        """The text of a passage (cached after a search returned it). Raises KeyError if absent."""
        return self.passages[passage_id].text

    def hybrid_search(self, sparse_queries: list[str], dense_queries: list[str], k: int, rrf_k: int = 60,
                      depth: int | None = None) -> list[Ranking]:
        """BM25 of ``sparse_queries[i]`` and dense search of ``dense_queries[i]`` fused by reciprocal
        rank fusion (Cormack et al., SIGIR 2009; score ``Σ 1/(rrf_k + rank)``) inside Milvus
        (``hybrid_search`` with ``RRFRanker(rrf_k)``), ``depth`` candidates per list (default ``k``).

        Returns:
            One Ranking of at most ``k`` passages per query, best first (RRF scores).
        """
        pm = _pymilvus()
        if len(sparse_queries) != len(dense_queries):
            raise ValueError("hybrid_search: one sparse and one dense query per question")
        depth = depth or k
        vectors = self.encoder.encode(dense_queries, is_query=True) if dense_queries else []
        out = []
        for q, v in zip(sparse_queries, vectors):
            reqs = [pm.AnnSearchRequest(data=[v.tolist()], anns_field="dense", param={"metric_type": "IP"},
                                        limit=depth)]
            if q.strip():
                reqs.insert(0, pm.AnnSearchRequest(data=[q], anns_field="sparse", param={"metric_type": "BM25"},
                                                   limit=depth))
            res = self.client.hybrid_search(self.collection, reqs, ranker=pm.RRFRanker(rrf_k), limit=k,
                                            output_fields=FIELDS)
            out.extend(_rankings(res, self.passages.cache))
        return out

    @classmethod
    def open(cls, cfg) -> "MilvusIndex":
        """Connect to ``cfg.index``'s Milvus and open its collection, checking its manifest against
        ``cfg`` (embedder name and model sha256, as for an embedded index).

        Raises:
            MilvusError: no such collection, not a preqrag collection, or another embedder;
                ``[bm25] prf`` set (RM3 reads bm25s's score matrix, which Milvus does not expose).
        """
        from ..models.encoders import load_encoder
        from .embedded import IndexOpenError

        if cfg.bm25.prf != "none":
            raise MilvusError(f'[bm25] prf = "{cfg.bm25.prf}" runs on the embedded bm25s index; the milvus backend '
                              'scores BM25 inside Milvus: set prf = "none" or use an embedded index')
        client = connect(cfg)
        name = cfg.index.collection
        try:
            manifest = _check_manifest(client, name, cfg)
        except (MilvusError, IndexOpenError):
            disconnect(client, cfg)
            raise
        except _pymilvus().MilvusException as e:
            disconnect(client, cfg)
            raise MilvusError(f"Milvus at {cfg.index.uri}: {e}") from e
        client.load_collection(name)
        encoder = load_encoder(cfg.embedder, cfg.run.cache_dir)
        return cls(client, name, manifest, encoder, cfg.embedder.batch_size, cfg)


def _check_manifest(client, name: str, cfg) -> dict:
    """The collection's manifest, checked against ``cfg``'s embedder (name and model sha256).

    Raises:
        MilvusError: no such collection, or not a preqrag collection.
        IndexOpenError: built with another embedder, or another version of it.
    """
    from .embedded import IndexOpenError, _embedder_sha256

    if not client.has_collection(name):
        raise MilvusError(f"Milvus at {cfg.index.uri} has no collection {name!r}; load one with "
                          "`preqrag index --backend milvus --index IDX`")
    manifest = _manifest_of(client, name)
    built = manifest["embedder"]["name"]
    if built != cfg.embedder.name:
        raise IndexOpenError(f"Milvus collection {name!r} was built with embedder {built!r} but the "
                             f"configuration asks for {cfg.embedder.name!r}")
    sha = manifest["embedder"].get("model_sha256")
    current = _embedder_sha256(cfg) if sha else None
    if sha and current is not None and current != sha:
        raise IndexOpenError(f"Milvus collection {name!r} was built with another version of the embedder "
                             f"{built!r} (model sha256 {sha[:12]}, now {current[:12]})")
    return manifest
