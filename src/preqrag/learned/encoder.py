"""``preqrag train-encoder``: fine-tune the dense encoder on the user's questions (issue 14).

Training pairs, one per (question, gold document):

* **anchor**: the question text (with ``[embedder] query_prefix``);
* **positive**: the gold document's passage ranked highest by the current retrieval for the
  question — the configured pipeline's retrieval (default: hybrid BM25 + dense, union,
  cross-encoder) with the interleave merge; the first passage in its final ranking, else in
  the fused, BM25 or dense lists (trace depth 100); a gold document none of whose passages was
  retrieved gives its first passage (position 0);
* **hard negatives** (``hard_negatives`` per pair): the highest-ranked passages of non-gold
  documents in the same final ranking (then the fused list), i.e. passages that BM25/dense and
  the cross-encoder put high although their document is not gold.

Loss: sentence-transformers' ``MultipleNegativesRankingLoss`` (in-batch negatives: every other
positive and hard negative of the batch; scale 20, cosine), AdamW with linear warm-up over the
first 10 % of steps. Fixed seed (``torch.manual_seed``, shuffling with ``numpy`` seeded per
epoch): the same inputs give the same weights on the same machine and thread count.

Checkpoints: every ``checkpoint_every`` steps the model, the optimizer and the step are saved to
``<MODEL_DIR>.checkpoint/`` (written in a temporary directory, then renamed); a re-run with the
same data and parameters resumes there. The finished model is written to ``MODEL_DIR``
(a sentence-transformers directory, usable as ``[embedder] name = "MODEL_DIR"``) with
``preqrag_training.json``: base model, parameters, training question ids and text hashes
(evaluation refuses them, :mod:`preqrag.learned.guard`), the weights' fingerprint
(:func:`preqrag.index.embedded.model_sha256`, also recorded by ``preqrag index``), wall seconds and
peak RSS. The plain training loop (no ``SentenceTransformerTrainer``) needs neither
``datasets`` nor ``accelerate``.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.io import atomic_write_text
from ..core.records import Question, Trace, doc_of
from ..models.encoders.trained import ENCODER_RECORD
from .ranker import question_sha256
from .train import collect_traces, gold_docs


@dataclass
class EncoderParams:
    """Fine-tuning parameters.

    Attributes:
        epochs: passes over the pairs (default 1).
        batch_size: pairs per step; each pair's positive is a negative for the others (default 32).
        hard_negatives: mined hard negatives per pair (default 1; 0: in-batch negatives only).
        learning_rate: AdamW peak learning rate (default 2e-5).
        max_seq_length: tokens per text (default 256, the bundled model's window).
        max_steps: stop after this many steps (0: all epochs).
        checkpoint_every: steps between checkpoints (default 100).
        seed: seed of torch and the shuffling (default 0).
        threads: torch CPU threads (default 2).
    """

    epochs: int = 1
    batch_size: int = 32
    hard_negatives: int = 1
    learning_rate: float = 2e-5
    max_seq_length: int = 256
    max_steps: int = 0
    checkpoint_every: int = 100
    seed: int = 0
    threads: int = 2


def _ranked_passages(trace: Trace) -> list[str]:
    """Passage ids in retrieval order: final, then merged, sparse, dense lists (first occurrence)."""
    seen: set[str] = set()
    out: list[str] = []
    for key in ("final", "merged", "sparse", "dense"):
        for r in trace.rankings.get(key, []):
            for pid in r.ids:
                if pid not in seen:
                    seen.add(pid)
                    out.append(pid)
    return out


def mine_pairs(questions: Sequence[Question], traces: dict[str, Trace], first_passage: dict[str, str],
               hard_negatives: int) -> list[dict]:
    """Training examples (see the module docstring).

    Args:
        questions: questions with gold documents.
        traces: their retrieval traces (:func:`preqrag.learned.train.collect_traces`).
        first_passage: document id → its first passage id (for gold documents never retrieved).
        hard_negatives: negatives per example.

    Returns:
        ``[{"qid", "doc_id", "positive": passage id, "negatives": [passage ids]}]`` in question
        order; gold documents missing from the index are skipped.
    """
    out = []
    for q in questions:
        gold = gold_docs(q)
        ranked = _ranked_passages(traces[q.key])
        negatives = [p for p in ranked if doc_of(p) not in set(gold)][:hard_negatives]
        for d in gold:
            pos = next((p for p in ranked if doc_of(p) == d), first_passage.get(d))
            if pos is None:
                continue
            out.append({"qid": q.key, "doc_id": d, "positive": pos, "negatives": list(negatives)})
    return out


def _pairs_sha256(pairs: list[dict], params: EncoderParams, base: str) -> str:
    key = {"pairs": pairs, "params": {k: v for k, v in asdict(params).items() if k != "checkpoint_every"},
           "base": base}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()


def _save_checkpoint(ckpt: Path, model, optimizer, scheduler, state: dict) -> None:
    import torch

    tmp = ckpt.with_name(ckpt.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp / "model"))
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, tmp / "optimizer.pt")
    atomic_write_text(tmp / "state.json", json.dumps(state))
    old = ckpt.with_name(ckpt.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if ckpt.exists():
        os.replace(ckpt, old)
    os.replace(tmp, ckpt)
    shutil.rmtree(old, ignore_errors=True)


def train_encoder(pipeline, questions: Sequence[Question], output: str | Path, params: EncoderParams, *,
                  progress: Callable[[str, int, int], None] | None = None,
                  traces: dict[str, Trace] | None = None) -> dict:
    """Fine-tune the pipeline's embedder on ``questions`` and write it to ``output``.

    Args:
        pipeline: a :class:`~preqrag.run.pipeline.Pipeline` over the index (its retrieval picks the
            positives and negatives; its ``[embedder]`` is the base model, a sentence-transformers
            model such as the bundled all-MiniLM-L6-v2).
        questions: questions with ``gold_doc_ids``.
        output: the model directory to write (replaced when it exists).
        params: :class:`EncoderParams`.
        progress: ``progress(phase, done, total)`` (phases ``retrieving``, ``training``).
        traces: retrieval traces of ``questions`` already at hand (``{question key: Trace}`` from
            :func:`preqrag.learned.train.collect_traces` with the same pipeline); ``None``: retrieved
            now, cached in ``<output>.traces.jsonl``.

    Returns:
        The training record written to ``output/preqrag_training.json``.

    Raises:
        ValueError: the base model is not a sentence-transformers model (ONNX models cannot be
            trained), or no training pair could be built.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.losses import MultipleNegativesRankingLoss

    from ..models.files import resolve

    output = Path(output)
    t0 = time.perf_counter()
    base = resolve(pipeline.cfg.embedder.name)
    if base.format not in ("sentence-transformers", "hub"):
        raise ValueError(f"embedder.name: {pipeline.cfg.embedder.name!r} is a {base.format} model and cannot be "
                         "fine-tuned; use a sentence-transformers model (e.g. sentence-transformers/all-MiniLM-L6-v2)")
    cache = output.with_name(output.name + ".traces.jsonl")
    output.parent.mkdir(parents=True, exist_ok=True)
    if traces is None:
        traces = collect_traces(pipeline, questions, cache, progress=(lambda d, t: progress("retrieving", d, t))
                                if progress else None)
    first: dict[str, str] = {}
    for pid in pipeline.index.passage_ids:
        first.setdefault(doc_of(pid), pid)
    pairs = mine_pairs(questions, traces, first, params.hard_negatives)
    if not pairs:
        raise ValueError("no (question, gold passage) pair: are the gold documents in the index?")
    text = pipeline.index.text
    qtext = {q.key: q.question for q in questions}
    qp, pp = pipeline.cfg.embedder.query_prefix, pipeline.cfg.embedder.passage_prefix

    torch.set_num_threads(params.threads)
    torch.manual_seed(params.seed)
    key = _pairs_sha256(pairs, params, base.location)
    ckpt = output.with_name(output.name + ".checkpoint")
    saved = _checkpoint_state(ckpt, key)
    resume = saved is not None
    state = saved or {"step": 0, "key": key}
    model = SentenceTransformer(str(ckpt / "model") if resume else base.location, device="cpu")
    model.max_seq_length = params.max_seq_length
    loss = MultipleNegativesRankingLoss(model)
    steps_per_epoch = (len(pairs) + params.batch_size - 1) // params.batch_size
    total = steps_per_epoch * params.epochs
    if params.max_steps:
        total = min(total, params.max_steps)
    optimizer, scheduler = _optimizer(model, params, total, ckpt if resume else None)
    model.train()
    step, losses = _train_steps(model, loss, optimizer, scheduler, pairs, params, state["step"], steps_per_epoch,
                                total, lambda batch: _batch_columns(batch, qtext, text, qp, pp), ckpt, key, progress)
    model.eval()
    record = _training_record(pipeline, questions, params, base.location, len(pairs), step, losses, t0)
    _save_model(model, output, record)
    shutil.rmtree(ckpt, ignore_errors=True)
    return record


def _optimizer(model, params: EncoderParams, total: int, checkpoint: Path | None):
    """(AdamW, linear warm-up over the first 10 % of ``total`` steps) for ``model``, their state read
    from ``checkpoint`` when resuming."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=params.learning_rate)
    warmup = max(1, total // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    if checkpoint is not None:
        opt = torch.load(checkpoint / "optimizer.pt", weights_only=True)
        optimizer.load_state_dict(opt["optimizer"])
        scheduler.load_state_dict(opt["scheduler"])
    return optimizer, scheduler


def _save_model(model, output: Path, record: dict) -> None:
    """Write ``model`` with its training ``record`` (plus the model's hash) to ``output``: into a
    temporary directory first, which then replaces ``output``."""
    from ..index.embedded import model_sha256

    tmp = output.with_name(output.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp))
    record["model_sha256"] = model_sha256(tmp)
    atomic_write_text(tmp / ENCODER_RECORD, json.dumps(record, indent=1, sort_keys=True))
    if output.exists():
        shutil.rmtree(output)
    os.replace(tmp, output)


def _batch_columns(batch: list[dict], qtext: dict[str, str], text, qp: str, pp: str) -> list[list[str]]:
    """The loss's input columns for one batch of mined pairs: the questions, their positives, then
    one column per hard negative that every pair of the batch has."""
    columns = [[qp + qtext[p["qid"]] for p in batch], [pp + text(p["positive"]) for p in batch]]
    columns += [[pp + text(p["negatives"][k]) for p in batch]
                for k in range(min(len(p["negatives"]) for p in batch))]
    return columns


def _train_steps(model, loss, optimizer, scheduler, pairs: list[dict], params: EncoderParams, done: int,
                 steps_per_epoch: int, total: int, columns_of, ckpt: Path, key: str,
                 progress) -> tuple[int, list[float]]:
    """The training loop of :func:`train_encoder`: ``total`` steps over ``params.epochs`` seeded
    shuffles of ``pairs`` (``steps_per_epoch`` batches each), skipping the ``done`` steps a
    checkpoint holds (dropout seeded per step, so a resumed run equals an uninterrupted one),
    checkpointing every ``params.checkpoint_every``.
    Returns (steps taken, the losses of the steps run in this call)."""
    import numpy as np
    import torch

    step = 0
    losses: list[float] = []
    for epoch in range(params.epochs):
        order = np.random.RandomState(params.seed + epoch).permutation(len(pairs))
        for b in range(steps_per_epoch):
            if step >= total:
                break
            if step < done:  # done before the checkpoint
                step += 1
                continue
            torch.manual_seed(params.seed * 1_000_003 + step)  # dropout masks independent of resuming
            columns = columns_of([pairs[i] for i in order[b * params.batch_size:(b + 1) * params.batch_size]])
            tokenize = getattr(model, "preprocess", None) or model.tokenize
            value = loss([{k: v.to(model.device) if hasattr(v, "to") else v for k, v in tokenize(col).items()}
                          for col in columns], None)
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            scheduler.step()
            losses.append(float(value.detach()))
            step += 1
            if progress:
                progress("training", step, total)
            if step % params.checkpoint_every == 0 and step < total:
                _save_checkpoint(ckpt, model, optimizer, scheduler, {"step": step, "key": key})
    return step, losses


def _checkpoint_state(ckpt: Path, key: str) -> dict | None:
    """The saved ``{"step", "key"}`` of a checkpoint of this training (same pairs, parameters and
    base model: ``key``), or None; a checkpoint of another training is removed."""
    try:
        saved = json.loads((ckpt / "state.json").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        saved = None
    if saved is not None and saved.get("key") == key:
        return saved
    shutil.rmtree(ckpt, ignore_errors=True)
    return None


def _training_record(pipeline, questions: Sequence[Question], params: EncoderParams, location: str,
                     n_pairs: int, steps: int, losses: list[float], t0: float) -> dict:
    """What ``output/preqrag_training.json`` records (``model_sha256`` added by the caller): the
    base model, parameters, pairs and steps, first and last loss, the retrieval that picked the
    pairs, the questions trained on (:mod:`preqrag.learned.guard` refuses them in evaluation),
    seconds and peak memory."""
    return {
        "format": "preqrag-trained-encoder", "version": 1,
        "base_model": pipeline.cfg.embedder.name, "base_location": location,
        "params": asdict(params), "n_pairs": n_pairs, "steps": steps,
        "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
        "positives": "the gold document's passage ranked highest by the configured retrieval "
                     "(interleave merge), else its first passage",
        "retrieval_config": pipeline.cfg.model_dump(mode="json", include={"retrieval", "fusion", "cross_encoder",
                                                                         "rerank", "rewriter", "embedder"}),
        "trained_on": {"ids": sorted(q.key for q in questions),
                       "question_sha256": sorted({question_sha256(q.question) for q in questions})},
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


