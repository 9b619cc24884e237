"""bench/harness.py under its earlier name: ``from _common import ...`` keeps working (the studies
import from ``harness``)."""

from harness import (PLACEHOLDERS, RowIds, add_dev_sample_args, command, config_sha256, corpus_head, describe,
                     dev_sample, final_retrieval_columns, free_port, gold_traces, http_get, http_post, input_hashes,
                     machine, md_table, merge_rows, pct, peak_mb, placeholders, read_rows, recall_vs, sha256,
                     stage_means, status_mb, utc_now, vector_shards, wait_ready, write_json)

__all__ = ["PLACEHOLDERS", "RowIds", "add_dev_sample_args", "command", "config_sha256", "corpus_head", "describe",
           "dev_sample", "final_retrieval_columns", "free_port", "gold_traces", "http_get", "http_post",
           "input_hashes", "machine", "md_table", "merge_rows", "pct", "peak_mb", "placeholders", "read_rows",
           "recall_vs", "sha256", "stage_means", "status_mb", "utc_now", "vector_shards", "wait_ready",
           "write_json"]
