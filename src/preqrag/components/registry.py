"""Components by name: one registry per pipeline slot.

Every component (built-in or a user's) is registered next to its code with
:func:`register`::

    register_table("echo", EchoSettings)         # preqrag.core.config: the [echo] table

    @register("generator", "echo", reads=("echo",))
    def build_echo(ctx: Context) -> Generator:
        return EchoGenerator(ctx.cfg.echo)

* ``slot``: one of :data:`SLOTS` (the configuration field that names it is :data:`FIELDS`);
* ``name``: the value that selects it in that field;
* ``reads``: the configuration tables the component's settings come from (besides the
  shared models): :meth:`preqrag.run.pipeline.Pipeline.derive` rebuilds the component when one of
  them changed, and reuses it otherwise;

A system's settings tables are registered once per table with
:func:`preqrag.core.config.register_table` (several of its components read one table), and its
presets with :func:`preqrag.core.presets.register_preset`.

The built-in systems (:data:`preqrag.core.config.SYSTEMS`, one package each) and the core
components register on first lookup (:data:`BUILTIN`, imported by name so that the registry
stays below them in the layers); a user's system registers when its module is imported, e.g.
through ``imports = ["my_system"]`` at the top of the TOML (:func:`preqrag.core.config.load_config`).
No plugin entry points: a system is a module.

A builder takes the :class:`Context` (configuration, opened index, shared LLM, model pool)
and returns the component without loading weights (Haystack's ``__init__`` / ``warm_up``
split). Models used by several components are shared through :meth:`Context.shared`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from ..core.config import RENAMED_TABLES, SYSTEMS, PipelineConfig, import_once

SLOTS: tuple[str, ...] = ("classifier", "rewriter", "retriever", "fusion", "rerank", "merge", "generator")
"""The pipeline's slots that components fill (:mod:`preqrag.run.pipeline`, in order)."""

FIELDS: dict[str, str] = {
    "classifier": "classifier.name", "rewriter": "rewriter.name", "retriever": "retrieval.extra",
    "fusion": "fusion.name",
    "rerank": "rerank.chain", "merge": "merge.name", "generator": "generator.name"}
"""The configuration field that names each slot's component (``rerank.chain``: a list)."""

BUILTIN: tuple[str, ...] = (
    "preqrag.components.classifiers", "preqrag.components.rewriting", "preqrag.components.fusion",
    "preqrag.components.reranking", "preqrag.components.generation", "preqrag.components.answering",
    "preqrag.learned.ranker", *SYSTEMS)
"""Modules that register the built-in components: the core ones every system may use (the
classifiers, the ``none`` rewriter, fusion, the cross-encoder step, the grounded-answer and
extractive generators, the learned merge) and the systems' packages
(:data:`preqrag.core.config.SYSTEMS`), imported on the first lookup."""


@dataclass(frozen=True)
class Registration:
    """One registered component: its ``slot``, ``name``, ``build(ctx)`` function, the
    configuration tables it ``reads`` and the ``module`` that registered it."""

    slot: str
    name: str
    build: Callable[["Context"], Any]
    reads: tuple[str, ...]
    module: str


_REGISTRY: dict[str, dict[str, Registration]] = {slot: {} for slot in SLOTS}


def register(slot: str, name: str, *, reads: tuple[str, ...] = ()) -> Callable:
    """Decorator registering ``build(ctx)`` as component ``name`` of ``slot``.

    Args:
        slot: one of :data:`SLOTS`.
        name: the name that selects it in the slot's configuration field (:data:`FIELDS`).
        reads: configuration tables its settings come from (see the module docstring).

    Raises:
        ValueError: unknown slot; ``name`` already registered in ``slot`` by another module.
    """
    if slot not in _REGISTRY:
        raise ValueError(f"register: unknown slot {slot!r}; slots: {', '.join(SLOTS)}")
    reads = _renamed_reads(slot, name, reads)

    def decorator(fn: Callable[["Context"], Any]) -> Callable[["Context"], Any]:
        old = _REGISTRY[slot].get(name)
        if old is not None and old.module != fn.__module__:
            raise ValueError(f"register: {slot} {name!r} is already registered by {old.module}")
        _REGISTRY[slot][name] = Registration(slot, name, fn, tuple(reads), fn.__module__)
        return fn

    return decorator


def _renamed_reads(slot: str, name: str, reads) -> tuple[str, ...]:
    """``reads`` with the old table names of :data:`preqrag.core.config.RENAMED_TABLES` replaced (a
    warning each): a component registered before a rename would otherwise compare a table that no
    configuration has, and :meth:`preqrag.run.pipeline.Pipeline.derive` would never rebuild it."""
    out = []
    for table in reads:
        if table in RENAMED_TABLES:
            new = RENAMED_TABLES[table]
            # FutureWarning: shown by default (see preqrag.core.config.renamed_tables)
            warnings.warn(f"register({slot!r}, {name!r}): reads [{table}], which is now [{new}]; the old "
                          f"name is read for now and will be removed", FutureWarning, stacklevel=3)
            table = new
        out.append(table)
    return tuple(out)


def _ensure_builtin() -> None:
    import_once(BUILTIN)


def names(slot: str) -> list[str]:
    """The registered names of ``slot``, in registration order."""
    _ensure_builtin()
    return list(_REGISTRY[slot])


def lookup(slot: str, name: str) -> Registration:
    """The registration of ``name`` in ``slot``.

    Raises:
        ValueError: unknown name, naming the configuration field and the valid names.
    """
    _ensure_builtin()
    entry = _REGISTRY[slot].get(name)
    if entry is None:
        raise ValueError(f"{FIELDS[slot]}: unknown component {name!r}; valid: {', '.join(_REGISTRY[slot])}")
    return entry


def build(slot: str, name: str, ctx: "Context") -> Any:
    """``lookup(slot, name).build(ctx)`` (for ``rerank``, ``None`` means the step is off).

    Raises:
        ValueError: unknown ``name`` (see :func:`lookup`).
    """
    return lookup(slot, name).build(ctx)


def tables_of(cfg: PipelineConfig, reads: tuple[str, ...]) -> dict:
    """The settings a component reads, for comparing two configurations."""
    data = cfg.model_dump()
    return {t: data.get(t) for t in reads}


@dataclass
class Context:
    """What builders share.

    Attributes:
        cfg: the configuration.
        index: the opened index (``None`` for components built without one).
        llm: the LLM every component that needs one shares (``None``: built from ``[llm]``
            on the first :meth:`get_llm`; its weights load at warm-up or first use).
        pool: models shared by construction, keyed by (kind, name, settings) (see
            :meth:`shared`); a pipeline derived from another keeps its pool.
    """

    cfg: PipelineConfig
    index: Any = None
    llm: Any = None
    pool: dict = field(default_factory=dict)

    def get_llm(self):
        """The shared LLM, built from ``[llm]`` on first use (no weights load here)."""
        if self.llm is None:
            from ..models.llm import load_llm

            self.llm = load_llm(self.cfg.llm, cache_dir=self.cfg.run.cache_dir)
        return self.llm

    def shared(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()`` once per ``key`` (e.g. ``("cross-encoder", name, max_length, batch_size,
        cache_dir)``): the GINGER pair scorer and the rerank chain's cross-encoder are one
        model in memory, and a derived pipeline reuses the models of its parent."""
        if key not in self.pool:
            self.pool[key] = make()
        return self.pool[key]
