"""The component registry records what each builder reads of the configuration (issue 56): the
tables ``Pipeline.derive`` compares come from the builders themselves, and a component that reads
a setting after its builder returned fails at once instead of escaping the record."""

from __future__ import annotations

import pytest

from preqrag.components.registry import _REGISTRY, Context, SettingsView, build, register
from preqrag.core.config import load_config


@pytest.fixture
def registered():
    """Registers test components for one test, then removes them."""
    names: list[tuple[str, str]] = []

    def add(slot: str, name: str, fn):
        register(slot, name)(fn)
        names.append((slot, name))

    yield add
    for slot, name in names:
        del _REGISTRY[slot][name]


def test_build_records_the_tables_the_builder_read(registered):
    cfg = load_config(None)
    ctx = Context(cfg)
    build("fusion", "rrf", ctx)
    build("generator", "extractive", ctx)
    build("merge", "interleave", ctx)
    assert ctx.reads[("fusion", "rrf")] == {"fusion"}
    assert ctx.reads[("generator", "extractive")] == {"deadline", "generator"}
    assert ctx.reads[("merge", "interleave")] == frozenset()  # reads nothing: never rebuilt for a setting
    registered("fusion", "dumps-all", lambda c: c.cfg.model_dump())  # not a table: every table counts
    build("fusion", "dumps-all", ctx)
    assert ctx.reads[("fusion", "dumps-all")] >= {"fusion", "llm", "cross_encoder", "dota", "ginger"}


def test_the_llm_is_read_by_every_builder_that_uses_it(registered):
    shared = object()
    registered("fusion", "uses-llm", lambda c: c.get_llm())
    ctx = Context(load_config(None), llm=shared)
    assert build("fusion", "uses-llm", ctx) is shared
    assert ctx.reads[("fusion", "uses-llm")] == {"llm"}  # the LLM existed: [llm] still counts


def test_a_setting_read_after_the_builder_returned_fails(registered):
    registered("fusion", "late", lambda c: (lambda: c.cfg.fusion.rrf_k))
    registered("fusion", "kept-view", lambda c: c.cfg)
    later = build("fusion", "late", Context(load_config(None)))
    with pytest.raises(AssertionError, match=r"the builder of fusion 'late' read the configuration \(fusion\) after"):
        later()
    view = build("fusion", "kept-view", Context(load_config(None)))
    with pytest.raises(AssertionError, match="after it returned"):
        view.generator
    with pytest.raises(AttributeError):
        view.generator = None  # read-only


def test_a_view_of_a_view_records_in_both():
    cfg = load_config(None)
    outer = SettingsView(cfg, "outer")
    inner = SettingsView(outer, "inner")
    assert inner.cross_encoder.depth == cfg.cross_encoder.depth
    assert inner.tables == outer.tables == {"cross_encoder"}
