"""WordLlama passage encoding: wordllama's own ``WordLlamaInference.embed`` against preqrag's encoder
(a sparse token-count matrix times the table, ``preqrag.models.encoders.wordllama``) on the same passages.

Both are run alone, one after the other, each on every passage once after a warm-up batch; reports
passages per second for each and the largest absolute difference between their vectors (the two
compute the same L2-normalised mean of token vectors; a difference above float32 rounding would be a
defect). Writes docs/bench/wordllama_encode.json.

Usage: python bench/wordllama_encode.py --passages IDX/passages.parquet [--n 20000] [-o OUT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import numpy as np

from harness import command, machine  # noqa: E402


def library_model(enc):
    """wordllama's own ``WordLlamaInference`` on the table and tokenizer ``enc`` encodes with (its
    public ``weights``, ``dim`` and ``tokenizer``), loaded as
    :class:`preqrag.models.encoders.wordllama.WordLlamaEncoder` loads it (its first ``dim`` columns)."""
    from safetensors import safe_open
    from wordllama.inference import WordLlamaInference

    with safe_open(str(enc.weights), framework="np", device="cpu") as f:
        table = f.get_tensor("embedding.weight")[:, : enc.dim]
    return WordLlamaInference(table, enc.tokenizer)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", required=True, help="a Parquet file with a text column (an index's passages.parquet)")
    ap.add_argument("--n", type=int, default=20000, help="passages (the first N)")
    ap.add_argument("-o", "--out", default="docs/bench/wordllama_encode.json")
    args = ap.parse_args(argv)

    import pyarrow.parquet as pq

    from preqrag.core.config import EmbedderConfig
    from preqrag.models.encoders import load_encoder
    from preqrag.core.io import atomic_write_text

    texts: list[str] = []
    for batch in pq.ParquetFile(args.passages).iter_batches(batch_size=4096, columns=["text"]):
        texts += batch.column("text").to_pylist()
        if len(texts) >= args.n:
            break
    texts = texts[: args.n]
    cfg = EmbedderConfig(name="wordllama")
    enc = load_encoder(cfg)
    model = library_model(enc)
    ntok = sum(map(enc.count_tokens, texts)) / len(texts)  # not encode_batch: WordLlama's tokenizer pads batches

    def library(ts):
        return np.nan_to_num(np.asarray(model.embed(ts, norm=True, batch_size=max(cfg.batch_size, 256)), np.float32))

    def ours(ts):
        return enc.encode(ts, is_query=False, batch_size=cfg.batch_size)

    row = {"passages": len(texts), "mean_tokens_per_passage": round(ntok, 1), "batch_size": cfg.batch_size}
    vecs = {}
    for name, fn in (("wordllama_embed", library), ("preqrag_sparse", ours)):
        fn(texts[:1024])  # warm-up: model and tokenizer loaded, first-call costs out
        t = time.perf_counter()
        vecs[name] = fn(texts)
        s = time.perf_counter() - t
        row[name] = {"seconds": round(s, 2), "passages_per_second": round(len(texts) / s, 1)}
    diff = np.abs(vecs["wordllama_embed"] - vecs["preqrag_sparse"])
    row["max_abs_difference"] = float(diff.max())
    row["identical_rows"] = int((diff.max(axis=1) == 0).sum())
    row["speedup"] = round(row["preqrag_sparse"]["passages_per_second"] / row["wordllama_embed"]["passages_per_second"], 2)
    row.update(machine=machine(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               command=command("wordllama_encode", argv))
    print(json.dumps(row, indent=1))
    atomic_write_text(Path(args.out), json.dumps(row, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench wordllama_encode`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
