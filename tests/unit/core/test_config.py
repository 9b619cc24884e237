"""The configuration's renamed tables: ``[reranker]`` is now ``[cross_encoder]`` (issue 56), and a
configuration that still says ``[reranker]`` is read, with a warning, wherever one comes in (a file,
overrides, a dict, a component's ``reads``, a stored cache key)."""

from __future__ import annotations

import pytest

from preqrag.core.config import ConfigError, PipelineConfig, load_config, renamed_tables

OLD_NAME = r"\[reranker\] is now \[cross_encoder\]"


def test_old_table_name_in_a_file_is_read_with_a_warning(tmp_path):
    path = tmp_path / "old.toml"
    path.write_text("[reranker]\ndepth = 7\n")
    with pytest.warns(FutureWarning, match=OLD_NAME):
        cfg = load_config(path)
    assert cfg.cross_encoder.depth == 7
    assert "reranker" not in cfg.model_dump()  # read as the new table, not kept as an extra


def test_both_table_names_are_refused_naming_both(tmp_path):
    path = tmp_path / "both.toml"
    path.write_text("[reranker]\ndepth = 7\n[cross_encoder]\ndepth = 8\n")
    with pytest.raises(ConfigError, match=r"\[reranker\] and \[cross_encoder\]") as e:
        load_config(path)
    assert str(path) in str(e.value)
    with pytest.raises(ValueError, match=r"\[reranker\] and \[cross_encoder\]"):
        PipelineConfig.model_validate({"reranker": {"depth": 7}, "cross_encoder": {"depth": 8}})


def test_old_name_in_overrides_and_dicts_meets_the_new_name_of_a_preset_or_file(tmp_path):
    """The dota preset sets [cross_encoder] depth 20: an override under the old name replaces it
    (no clash between the preset's new name and the override's old one); so does one over a file."""
    with pytest.warns(FutureWarning, match=OLD_NAME):
        assert load_config(None, {"pipeline": "dota", "reranker": {"depth": 5}}).cross_encoder.depth == 5
    path = tmp_path / "new.toml"
    path.write_text("[cross_encoder]\ndepth = 9\nmax_length = 128\n")
    with pytest.warns(FutureWarning, match=OLD_NAME):
        cfg = load_config(path, {"reranker": {"depth": 4}})
    assert (cfg.cross_encoder.depth, cfg.cross_encoder.max_length) == (4, 128)
    with pytest.warns(FutureWarning, match=OLD_NAME):
        assert PipelineConfig.model_validate({"reranker": {"name": "none"}}).cross_encoder.name == "none"


def test_stored_configurations_are_renamed_without_a_warning(recwarn):
    stored = {"retrieval": {"top_k": 100}, "reranker": {"depth": 30}}
    assert renamed_tables(stored, warn=False) == {"retrieval": {"top_k": 100}, "cross_encoder": {"depth": 30}}
    assert renamed_tables("not a dict", warn=False) == "not a dict" and not recwarn.list

    from preqrag.learned.train import _stored_key

    key = {"corpus_sha256": "abc", "config": {"cross_encoder": {"depth": 30}}}
    assert _stored_key({"cache_key": {**key, "config": {"reranker": {"depth": 30}}}}) == key
    assert _stored_key({"cache_key": key}) == key and _stored_key({}) is None and not recwarn.list


def test_a_registration_that_still_lists_its_reads_is_warned():
    """``reads=`` (hand-kept, before the tables a builder reads were recorded) is accepted with a
    warning and not used: a list that named an old table (``[reranker]``) cannot mislead ``derive``."""
    from preqrag.components.registry import _REGISTRY, register

    with pytest.warns(FutureWarning, match="reads is no longer used"):
        register("fusion", "old-reads-test", reads=("fusion", "reranker"))(lambda ctx: None)
    try:
        assert not hasattr(_REGISTRY["fusion"]["old-reads-test"], "reads")
    finally:
        del _REGISTRY["fusion"]["old-reads-test"]


def test_help_texts_name_only_what_exists():
    """Every ``preqrag.X.Y`` a setting's description names (the configuration reference is made
    from them) is a module or an attribute that exists, so no help text points at a stale name."""
    import importlib
    import re

    from preqrag.core.config import config_reference

    text = config_reference(None, "core") + config_reference(None, "systems")
    missing = []
    for name in sorted(set(re.findall(r"preqrag(?:\.[A-Za-z_][A-Za-z0-9_]*)+", text)) - {"preqrag.toml"}):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj, rest = importlib.import_module(".".join(parts[:i])), parts[i:]
                break
            except ImportError:
                continue
        try:
            for attr in rest:
                obj = getattr(obj, attr)
        except AttributeError:
            missing.append(name)
    assert missing == []


def test_cli_prints_table_names_in_config_errors(tmp_path):
    """A config error names tables as ``[table]``; the CLI prints them as written, not as rich markup."""
    from conftest import run_cli

    path = tmp_path / "both.toml"
    path.write_text("[reranker]\ndepth = 7\n[cross_encoder]\ndepth = 8\n", encoding="utf-8")
    for args in (("config", "--config", str(path)), ("config", "-p", "cir", "--config", str(path))):
        r = run_cli(*args)
        assert r.returncode == 2
        assert "[reranker] and [cross_encoder] are both given" in r.stderr


def test_the_base_configuration_is_the_default_preset_and_preqrag_one_among_equals():
    """The base configuration is neutral (issue 56): PipelineConfig's defaults are ``hybrid``'s, the default
    preset (no LLM before the answer), so no system's values sit in the base for the others to undo; PreQRAG,
    like every other system, names what it changes (its rewriter)."""
    from preqrag.core.config import PipelineConfig
    from preqrag.core.presets import PRESETS

    base = PipelineConfig().model_dump()
    default = load_config(None)
    assert default.pipeline == "hybrid" and PRESETS["hybrid"] == {}
    assert default.model_dump() == base and base["rewriter"]["name"] == "none"
    preqrag, keep = load_config(None, pipeline="preqrag"), load_config(None, pipeline="preqrag-keep")
    assert preqrag.rewriter.name == keep.rewriter.name == "preqrag" and keep.rewriter.keep_original
    changed = {k for k, v in preqrag.model_dump().items() if v != base[k]}
    assert changed == {"pipeline", "rewriter"}
