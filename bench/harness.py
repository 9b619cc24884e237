"""The bench harness: what every study in bench/ shares (issue 56).

* **machine**: :func:`machine` (CPU, SIMD level, cores, RAM, OS, Python) and :func:`describe` (one line);
* **rows**: :func:`command` (the recorded ``python bench/NAME.py ...`` with :func:`placeholders` for
  machine paths), :func:`utc_now` (a row's date);
* **JSON**: :func:`read_rows` (a bench file, or a new one), :func:`merge_rows` (a rerun replaces its
  rows by key, default the label), :func:`write_json` (atomic, one space of indent);
* **input hashes**: :func:`sha256` of a file, :func:`input_hashes` (``NAME_sha256`` fields: the
  question file, an index's ``manifest.json``, ...), :func:`config_sha256` of a resolved configuration;
  recorded by the studies that opt in (bench/reproduce.py);
* the figures, data and servers the studies measure alike: :func:`pct`, :func:`stage_means`,
  :func:`recall_vs`, :func:`final_retrieval_columns`, :func:`gold_traces`, :func:`md_table`,
  :func:`dev_sample`, :func:`corpus_head`, :func:`peak_mb`, :func:`free_port`, :func:`wait_ready`,
  :class:`RowIds`, :func:`vector_shards`, ...

A study is a module of bench/ with ``run(argv=None) -> int``; ``python -m bench NAME [args]`` runs it
as ``python bench/NAME.py [args]`` does (bench/__main__.py), and a study imports from here, never
another study's private names. ``bench/_common.py`` is this module under its old name.

    python bench/harness.py                                  # this machine, as a row records it
    python bench/harness.py questions=Q.jsonl index=IDX      # and the input hashes of those files
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["PLACEHOLDERS", "RowIds", "add_dev_sample_args", "command", "config_sha256", "corpus_head", "describe",
           "dev_sample", "final_retrieval_columns", "free_port", "gold_traces", "http_get", "http_post",
           "input_hashes", "machine", "md_table", "merge_rows", "pct", "peak_mb", "placeholders", "read_rows",
           "recall_vs", "sha256", "stage_means", "status_mb", "utc_now", "vector_shards", "wait_ready",
           "write_json"]


def machine() -> dict:
    """CPU model, core count, RAM (GiB), OS and Python of this machine; ``simd``: the widest x86
    vector extension the CPU reports, with ``+ AMX`` where it advertises AMX tiles (machines named alike
    differ, and llama.cpp's prefill by 3-4x between them: timings carry it)."""
    cpu = platform.processor() or platform.machine()
    simd = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and cpu in (platform.processor(), platform.machine()):
                    cpu = line.split(":", 1)[1].strip()
                if line.startswith("flags") and simd is None:
                    flags = set(line.split(":", 1)[1].split())
                    simd = next((x for x in ("avx512f", "avx2", "avx", "sse4_2") if x in flags), "none")
                    simd = {"avx512f": "AVX-512"}.get(simd, simd.upper())
                    if "amx_tile" in flags:
                        simd += " + AMX"
    except OSError:
        pass
    ram = None
    try:
        ram = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": ram, "simd": simd, "os": platform.platform(),
            "python": platform.python_version()}


def stage_means(seconds: list[dict[str, float]]) -> dict[str, float]:
    """Mean seconds per question of every stage, from each trace's ``seconds`` dict (a stage
    missing from a trace counts 0), rounded to 0.1 ms, stages sorted by name."""
    stages = sorted({s for sec in seconds for s in sec})
    return {s: round(sum(sec.get(s, 0.0) for sec in seconds) / len(seconds), 4) for s in stages}


def recall_vs(exact: list[set], found) -> float:
    """Share of each question's exact top-10 passages found (``found``: one id collection per
    question), averaged over questions. Shared by bench/ann.py, scale.py and ann_scale.py."""
    import numpy as np

    return float(np.mean([len(a & set(b)) / max(1, len(a)) for a, b in zip(exact, found)]))


def pct(xs, p: float) -> float | None:
    """The p-th percentile (nearest rank: the smallest value with at least p % of ``xs`` at or
    below it) of ``xs``; None when empty. Shared by every bench/ latency figure."""
    xs = list(xs)
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def gold_traces(questions, rankings) -> list:
    """Traces holding one ``final`` ranking per question (its gold question type, no plan), so a
    first-stage retriever's output is scored by :func:`final_retrieval_columns` like a pipeline's."""
    from preqrag.core.records import Classification, QueryPlan, SubQuery, Trace

    out = []
    for q, r in zip(questions, rankings):
        qt = "multi" if len(q.extra.get("gold_doc_ids") or []) > 1 else "single"
        out.append(Trace(id=q.id, classification=Classification(question_type=qt, classifier="gold"),
                         plan=QueryPlan(question_type=qt, rewriter="none",
                                        sub_queries=[SubQuery(text=q.question, sparse=q.question, dense=q.question)]),
                         rankings={"final": [r]}))
    return out


def md_table(rows: list[dict], cols: list[str], head: list[str] | None = None) -> list[str]:
    """Markdown table lines of ``rows`` (dicts) over ``cols`` (headed ``head``, default the column
    names); a missing or None cell is empty. The one table writer of the bench scripts."""
    out = ["| " + " | ".join(head or cols) + " |", "|" + "---|" * len(cols)]
    return out + ["| " + " | ".join("" if r.get(c) is None else str(r[c]) for c in cols) + " |" for r in rows]


def describe(m: dict) -> str:
    """One line for Markdown tables."""
    simd = f" ({m['simd']})" if m.get("simd") else ""
    return f"{m['cpu']}{simd}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['os']}, Python {m['python']}"


def final_retrieval_columns(traces: list, questions: list) -> dict:
    """The ladder's retrieval columns of the ``final`` ranking at document level (ranx, via
    preqrag.evaluation.evaluate_retrieval): single hit@1 / hit@10 / MRR@10, multi recall@10 /
    all@10, shared by bench/ablation.py and bench/presets.py.

    Raises:
        preqrag.learned.guard.TrainedOnError: a learned model of the traces was trained on some of
            ``questions``."""
    from preqrag.evaluation import evaluate_retrieval
    from preqrag.learned.guard import check_traces

    check_traces(traces, questions)  # a learned model must not be scored on its training questions
    m = evaluate_retrieval(traces, questions, stages=["final"])
    block = m["metrics"]["final"]["breakdown"]["all"]["all"]
    single, multi = block["single"], block["multi"]
    return {"single_hit@1": single.get("hit@1"), "single_hit@10": single.get("hit@10"),
            "single_mrr@10": single.get("mrr@10"), "multi_recall@10": multi.get("recall@10"),
            "multi_all@10": multi.get("all@10")}


def corpus_head(corpus, n_docs: int, out):
    """The first ``n_docs`` documents of a JSONL(.gz) corpus written to ``out`` (JSONL); returns ``out``."""
    import gzip

    opener = gzip.open if str(corpus).endswith(".gz") else open
    with opener(corpus, "rt", encoding="utf-8") as fh, open(out, "w", encoding="utf-8") as dst:
        for i, line in enumerate(fh):
            if i >= n_docs:
                break
            dst.write(line)
    return out


PLACEHOLDERS = {"--index": "IDX", "--contexts": "CTX.jsonl", "--source": "IDX", "--cache-dir": "CACHE", "--config": "CONFIG", "--workdir": "WORK", "--work": "WORK",
                "--record-build": "M.json", "--time-log": "T.log", "--answers": "ANSWERS.jsonl"}
"""Options whose machine paths are written as placeholders in the recorded command."""


def placeholders(argv: list[str]) -> list[str]:
    """``argv`` with the values of :data:`PLACEHOLDERS`' options replaced (``--index IDX``), and
    any other absolute path cut to its file name (``--set llm.model=/x/y/m.gguf`` →
    ``llm.model=m.gguf``), so that docs/bench holds no machine paths."""
    out: list[str] = []
    for i, a in enumerate(argv):
        key, eq, value = a.partition("=")
        if eq and key in PLACEHOLDERS:
            out.append(f"{key}={PLACEHOLDERS[key]}")
        elif i > 0 and argv[i - 1] in PLACEHOLDERS:
            out.append(PLACEHOLDERS[argv[i - 1]])
        else:
            if a.startswith("/"):
                a = os.path.basename(a)
            elif eq and value.startswith("/"):
                a = f"{key}={os.path.basename(value)}"
            out.append(a if " " not in a and a else repr(a))
    return out


def command(script: str, argv: list[str] | None = None, *, paths: bool = True) -> str:
    """The command a row records: ``python bench/SCRIPT.py`` and ``argv`` (None: this process's
    ``sys.argv[1:]``, as the script was run), through :func:`placeholders` (``paths=False``: as
    given, for the studies whose rows never had placeholders)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return f"python bench/{script}.py " + " ".join(placeholders(args) if paths else args)


def utc_now(timespec: str = "seconds") -> str:
    """A row's date: now in UTC, ISO 8601 (``2026-05-01T10:00:00+00:00``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec=timespec)


# ---------------------------------------------------------------- the JSON of docs/bench
def read_rows(path: str | Path) -> dict:
    """A bench JSON file (a dict with ``rows``), ``{"rows": []}`` when it does not exist yet."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


def merge_rows(rows: list[dict], new: list[dict], key: tuple[str, ...] = ("label",)) -> list[dict]:
    """``rows`` without the ones equal to a row of ``new`` in every field of ``key`` (a missing
    field counts as None), then ``new``: a rerun replaces its rows, the others keep their order."""
    def ident(r: dict) -> tuple:
        return tuple(json.dumps(r.get(k), sort_keys=True) for k in key)

    replaced = {ident(r) for r in new}
    return [r for r in rows if ident(r) not in replaced] + list(new)


def write_json(path: str | Path, data, indent: int = 1, **dumps) -> None:
    """``data`` as JSON (``indent``, ``json.dumps``' other options) and a final newline, written
    atomically (:func:`preqrag.core.io.atomic_write_text`): a killed run leaves the old file."""
    from preqrag.core.io import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=indent, **dumps) + "\n")


# ---------------------------------------------------------------- input hashes
def sha256(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def input_hashes(**inputs: str | Path | None) -> dict[str, str]:
    """``{NAME_sha256: hex}`` of each input file a row ran on, in the order given (None: left
    out); a directory (an index) by its ``manifest.json``, as ``NAME_manifest_sha256`` (the
    manifest records every data file's hash). A missing file raises: a row names no input it
    cannot hash. ``input_hashes(questions=Q, index=IDX)`` →
    ``{"questions_sha256": ..., "index_manifest_sha256": ...}``."""
    out: dict[str, str] = {}
    for name, path in inputs.items():
        if path is None:
            continue
        path = Path(path)
        if path.is_dir():
            out[f"{name}_manifest_sha256"] = sha256(path / "manifest.json")
        else:
            out[f"{name}_sha256"] = sha256(path)
    return out


def config_sha256(config: str | Path | None) -> str:
    """sha256 of the resolved configuration (every setting, defaults included) as sorted JSON."""
    from preqrag.core.config import load_config

    data = load_config(config).model_dump(mode="json")
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------- memory of this process
def peak_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` of /proc/self/status, the high-water
    mark of its own address space. Not ``ru_maxrss``: Linux carries a forked child's copy of its
    parent's pages into that figure across ``exec``, so a child's ``ru_maxrss`` is at least its
    parent's RSS at the fork (a 2,000-vector build reported the parent's 687 MB)."""
    return status_mb("VmHWM")


def status_mb(field: str) -> float:
    """``field`` of /proc/self/status (``VmHWM``, ``VmRSS``, ``RssAnon``) in MB; NaN where absent."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


# ---------------------------------------------------------------- a local server under test
def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a bench starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_post(url: str, body: dict, timeout: float) -> tuple[int, dict | None, dict]:
    """POST ``body`` as JSON: ``(status, JSON reply or None, headers)``; HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw), dict(e.headers)
        except json.JSONDecodeError:
            return e.code, None, dict(e.headers)


def http_get(url: str) -> int:
    """GET ``url``: its HTTP status."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def wait_ready(proc: subprocess.Popen, url: str, log: Path | str) -> None:
    """Poll ``url/healthz`` until 200; exit with the log's name if the server process ends first."""
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"preqrag serve exited with {proc.returncode}; see {log}")
        try:
            if http_get(f"{url}/healthz") == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)


def add_dev_sample_args(ap) -> None:
    """``--questions`` (dev.jsonl), ``--sample`` (500), ``--head`` (200) and ``--seed`` (0): the
    ladder's fixed-seed dev sample, read by :func:`dev_sample`."""
    ap.add_argument("--questions", default="../shared/liverag-bench/dev.jsonl")
    ap.add_argument("--sample", type=int, default=500)
    ap.add_argument("--head", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (0: the ladder's sample)")


def dev_sample(args) -> tuple[list, str]:
    """(questions, what they are): ``args.sample`` questions of ``args.questions`` drawn with seed
    ``args.seed`` (all of them, shuffled, when the file has fewer), then the first ``args.head``."""
    from preqrag.core.io import read_questions

    questions, _ = read_questions(args.questions)
    questions = random.Random(args.seed).sample(questions, min(args.sample, len(questions)))[:args.head]
    return questions, f"fixed-seed dev sample (seed {args.seed}, {args.sample}, first {args.head})"


# ---------------------------------------------------------------- vectors without an index
class RowIds:
    """Passage ids ``"0"``, ``"1"``, ... made on access (no list of millions of strings): the ids
    of a :class:`preqrag.retrieval.dense.DenseRetriever` opened on bare vector files."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> str:
        return str(i)


def vector_shards(d: str | Path) -> list[Path]:
    """The vector shards of a bench/ann_scale.py size directory: its ``vectors/emb_*.npy`` or, made
    with ``--from-scale``, bench/scale.py's ``v_*.npy``."""
    d = Path(d)
    return sorted((d / "vectors").glob("emb_*.npy")) or sorted((d / "vectors").glob("v_*.npy"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", metavar="NAME=PATH",
                    help="input files (or index directories) to hash, as a row records them")
    args = ap.parse_args(argv)
    pairs = [x.partition("=") for x in args.inputs]
    if any(not eq or not name for name, eq, _ in pairs):
        ap.error("inputs are NAME=PATH")
    m = machine()
    print(json.dumps({"machine": m, "described": describe(m),
                      **input_hashes(**{name: path for name, _, path in pairs})}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
