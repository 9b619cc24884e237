"""Components by name: one registry per pipeline slot.

Every component (built-in or a user's) is registered next to its code with
:func:`register`::

    register_table("echo", EchoSettings)         # preqrag.core.config: the [echo] table

    @register("generator", "echo")
    def build_echo(ctx: Context) -> Generator:
        return EchoGenerator(ctx.cfg.echo)

* ``slot``: one of :data:`SLOTS` (the configuration field that names it is :data:`FIELDS`);
* ``name``: the value that selects it in that field.

The configuration tables a component's settings come from are those its builder reads:
:func:`build` hands the builder a :class:`SettingsView` of ``ctx.cfg`` that records every table
read through it and refuses reads once the builder has returned (a setting read later would
escape the record), and keeps them in :attr:`Context.reads`.
:meth:`preqrag.run.pipeline.Pipeline.derive` rebuilds a component when one of them changed, and
reuses it otherwise; no list of tables is kept by hand.

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

from ..core.config import SYSTEMS, PipelineConfig, import_once

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
    """One registered component: its ``slot``, ``name``, ``build(ctx)`` function and the
    ``module`` that registered it."""

    slot: str
    name: str
    build: Callable[["Context"], Any]
    module: str


_REGISTRY: dict[str, dict[str, Registration]] = {slot: {} for slot in SLOTS}


def register(slot: str, name: str, *, reads: tuple[str, ...] | None = None) -> Callable:
    """Decorator registering ``build(ctx)`` as component ``name`` of ``slot``.

    Args:
        slot: one of :data:`SLOTS`.
        name: the name that selects it in the slot's configuration field (:data:`FIELDS`).
        reads: no longer used (a warning): the tables a builder reads are recorded when it
            builds (see the module docstring).

    Raises:
        ValueError: unknown slot; ``name`` already registered in ``slot`` by another module.
    """
    if slot not in _REGISTRY:
        raise ValueError(f"register: unknown slot {slot!r}; slots: {', '.join(SLOTS)}")
    if reads is not None:  # FutureWarning: shown by default (as preqrag.core.config.renamed_tables')
        warnings.warn(f"register({slot!r}, {name!r}): reads is no longer used (the tables a builder reads are "
                      "recorded when it builds) and will be removed; drop it", FutureWarning, stacklevel=2)

    def decorator(fn: Callable[["Context"], Any]) -> Callable[["Context"], Any]:
        old = _REGISTRY[slot].get(name)
        if old is not None and old.module != fn.__module__:
            raise ValueError(f"register: {slot} {name!r} is already registered by {old.module}")
        _REGISTRY[slot][name] = Registration(slot, name, fn, fn.__module__)
        return fn

    return decorator


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
    """``lookup(slot, name).build(...)`` (for ``rerank``, ``None`` means the step is off), with the
    tables the builder read kept in ``ctx.reads[(slot, name)]``.

    The builder gets a copy of ``ctx`` whose ``cfg`` is a :class:`SettingsView` (its LLM, once
    made, and its model pool are ``ctx``'s); the view is closed when the builder returns.

    Raises:
        ValueError: unknown ``name`` (see :func:`lookup`).
    """
    registration = lookup(slot, name)
    view = SettingsView(ctx.cfg, f"the builder of {slot} {name!r}")
    building = Context(view, ctx.index, ctx.llm, ctx.pool)  # type: ignore[arg-type]
    try:
        component = registration.build(building)
    finally:
        view.close()
        if ctx.llm is None:
            ctx.llm = building.llm  # the LLM the builder made is the one every component shares
    ctx.reads[(slot, name)] = frozenset(view.tables)
    return component


class SettingsView:
    """A :class:`~preqrag.core.config.PipelineConfig` as a builder reads it (:func:`build`): each
    attribute read passes through, and the table it names is recorded in :attr:`tables`; any other
    attribute (``model_dump``, ...) records every table. After :meth:`close` every read raises, so a
    component cannot read settings after its builder returned (its record would miss them).

    Args:
        cfg: the configuration (or another view, which then records the reads too).
        owner: who reads, for the error (``"the builder of generator 'ginger'"``).
    """

    __slots__ = ("_cfg", "_owner", "_names", "_open", "tables")

    def __init__(self, cfg: "PipelineConfig | SettingsView", owner: str):
        self._cfg, self._owner, self._open = cfg, owner, True
        self._names = (cfg._names if isinstance(cfg, SettingsView)
                       else frozenset(type(cfg).model_fields) | frozenset(cfg.model_extra or {}))
        self.tables: set[str] = set()
        """The tables read so far."""

    def close(self) -> None:
        """Refuse every read from now on."""
        self._open = False

    def __getattr__(self, name: str) -> Any:
        if not self._open:
            raise AssertionError(f"{self._owner} read the configuration ({name}) after it returned: a builder reads "
                                 "every setting while it builds (preqrag.components.registry), else Pipeline.derive "
                                 "cannot tell when to rebuild the component")
        self.tables.update({name} if name in self._names else self._names)
        return getattr(self._cfg, name)


def tables_of(cfg: PipelineConfig, reads: frozenset[str]) -> dict:
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
        reads: what each component built with this context read of ``cfg`` (see below).
    """

    cfg: PipelineConfig
    index: Any = None
    llm: Any = None
    pool: dict = field(default_factory=dict)
    reads: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    """``(slot, name)`` → the tables the builder of that component read (:func:`build`)."""

    def get_llm(self):
        """The shared LLM, built from ``[llm]`` on first use (no weights load here). A builder that
        calls it reads ``[llm]`` (and ``[run]`` when it makes the LLM): its component uses the LLM."""
        settings = self.cfg.llm  # read even when the LLM exists: the component depends on [llm]
        if self.llm is None:
            from ..models.llm import load_llm

            self.llm = load_llm(settings, cache_dir=self.cfg.run.cache_dir)
        return self.llm

    def shared(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()`` once per ``key`` (e.g. ``("cross-encoder", name, max_length, batch_size,
        cache_dir)``): the GINGER pair scorer and the rerank chain's cross-encoder are one
        model in memory, and a derived pipeline reuses the models of its parent."""
        if key not in self.pool:
            self.pool[key] = make()
        return self.pool[key]
