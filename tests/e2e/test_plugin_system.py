"""The registry (issue 23): a system registered from outside the package (tests/plugins/toy_system.py)
runs through ``preqrag run``, its table is documented by ``preqrag config`` and validated."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import TESTS, config_toml

PLUGINS = TESTS / "plugins"


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_a_system_registered_outside_the_package_runs_through_preqrag_run(tmp_path, small_index, small_corpus):
    """One process of its own (the plugin's registrations must not leak into the test process),
    running five ``preqrag`` commands in order through the Typer app: without ``imports`` its
    preset and its table are unknown (before anything imports the module in that process); with it the toy system runs from its own preset; ``preqrag
    config`` documents its table; a misspelt key of its table is refused."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}
    questions = small_corpus[2][:2]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
    toml = config_toml({"imports": ["toy_system"], "pipeline": "toy", "cross_encoder": {"depth": 8, "max_length": 128},
                        "toy": {"prefix": "TOY says:"}})
    assert 'pipeline = "toy"' in toml
    cfg, plain, typo = tmp_path / "toy.toml", tmp_path / "plain.toml", tmp_path / "typo.toml"
    no_preset = tmp_path / "no_preset.toml"
    cfg.write_text(toml)
    plain.write_text(toml.replace('imports = ["toy_system"]\n', "").replace('pipeline = "toy"', 'pipeline = "hybrid"'))
    no_preset.write_text(toml.replace('imports = ["toy_system"]\n', ""))
    typo.write_text(toml.replace("prefix =", "prefx ="))
    out = tmp_path / "answers.jsonl"
    commands = [["run", qfile, "--index", small_index, "-o", tmp_path / "d.jsonl", "--config", no_preset],
                ["run", qfile, "--index", small_index, "-o", tmp_path / "c.jsonl", "--config", plain],
                ["run", qfile, "--index", small_index, "-o", out, "--config", cfg],
                ["config", "--config", cfg],
                ["run", qfile, "--index", small_index, "-o", tmp_path / "b.jsonl", "--config", typo]]
    driver = ("import json, sys\nfrom typer.testing import CliRunner\nfrom preqrag.cli.app import app\n"
              "out = []\nfor args in json.loads(sys.argv[1]):\n"
              "    r = CliRunner().invoke(app, args)\n"
              "    out.append([r.exit_code, r.stdout, r.stderr])\n"
              "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", driver, json.dumps([[str(a) for a in c] for c in commands])],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (code4, _, err4), (code0, _, err0), (code1, _, err1), (code2, out2, err2), (code3, _, err3) = json.loads(
        proc.stdout.splitlines()[-1])
    # without the import, the names are unknown, and the error says where names come from
    assert code0 == 2 and "toy: unknown table" in err0, err0
    assert code1 == 0, err1
    answers = _lines(out)
    assert [a["id"] for a in answers] == [q["id"] for q in questions]
    assert all(a["answer"].startswith("TOY says: ") and len(a["passages"]) == 1 for a in answers)
    traces = _lines(tmp_path / "answers.traces.jsonl")
    for t in traces:
        toy = t["rankings"]["toy"][0]["ids"]
        assert t["rankings"]["toy-word"] and toy
        assert t["context_ids"][0] == toy[0]  # the toy rerank step's head is the context
        assert t["seconds"]["rerank-toy"] >= 0 and "toy-word" in t["seconds"]
    # its table is documented by `preqrag config` and validated like a built-in one
    assert code2 == 0 and "[toy]" in out2 and 'prefix = "TOY says:"' in out2, err2
    assert code3 == 2 and "toy.prefx" in err3, err3
    assert code4 == 2 and "unknown preset 'toy'" in err4, err4  # the preset comes with the module
