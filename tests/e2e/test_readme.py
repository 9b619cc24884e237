"""README's usage commands run as written, against the smoke corpus (issue 43: the front page
cannot rot).

Each ``preqrag ...`` line of README's fenced blocks runs in a fresh folder beside a link to
``../shared`` (README's relative paths resolve as they do from the repository root), in README's
order, with a timeout. The file README calls ``questions.jsonl`` (the user's own question file) is
the first 5 smoke questions. ``preqrag serve`` runs until its ``/healthz`` answers ready, then is
stopped. Lines that need the network (``preqrag models install``: a download from PyPI) are left
out; the LLM is the suite's (``$PREQRAG_LLM_MODEL``, conftest.py), so the run takes minutes, not
the default model's half hour.

Marked ``readme``: not in README's test command (the suite's time budget); ``.ci/run`` runs it as
its own step with ``python -m pytest -q -m readme``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from _bench import unavailable
from conftest import REPO as ROOT

SHARED = ROOT.parent / "shared"

pytestmark = pytest.mark.readme

NEEDS_NETWORK = ("preqrag models install",)
TIMEOUT_S = 1800
"""A hang guard per command, not a timed assertion: README's ``preqrag run`` answers all 60 smoke
questions, which took longer than 600 s on CI's 2-core AVX2 machine (haswell llama.cpp kernels); this
whole test took 274 s on a 2-core AVX-512 machine."""


def readme_commands() -> list[str]:
    """README's ``preqrag`` command lines in fenced blocks, in order, without trailing comments
    (``./install.sh && preqrag demo`` counts as ``preqrag demo``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("preqrag "):
                    out.append(part)
    return out


def _serve_until_ready(argv: list[str], cwd: Path, env: dict) -> None:
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < TIMEOUT_S:
            assert proc.poll() is None, f"{shlex.join(argv)} exited {proc.returncode}: {proc.stdout.read()[-3000:]}"
            try:
                with urllib.request.urlopen("http://127.0.0.1:8000/healthz", timeout=5) as r:
                    if json.load(r)["status"] == "ready":
                        return
            except OSError:
                pass
            time.sleep(1)
        pytest.fail(f"{shlex.join(argv)}: not ready in {TIMEOUT_S} s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_readme_commands_run_as_written(tmp_path):
    if not (SHARED / "liverag-bench" / "smoke.jsonl").exists():
        unavailable(f"{SHARED / 'liverag-bench'} (README's data) not found")
    commands = readme_commands()
    assert any(c.startswith("preqrag index ") for c in commands) and any(c.startswith("preqrag run ")
                                                                         for c in commands)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(SHARED)
    smoke = (SHARED / "liverag-bench" / "smoke.jsonl").read_text(encoding="utf-8").splitlines()
    (work / "questions.jsonl").write_text("\n".join(smoke[:5]) + "\n", encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    ran = []
    for command in commands:
        if command.startswith(NEEDS_NETWORK):
            continue
        argv, redirect = shlex.split(command), None
        if ">" in argv:  # `preqrag config > preqrag.toml`
            i = argv.index(">")
            argv, redirect = argv[:i], argv[i + 1]
        if argv[1] == "serve":
            _serve_until_ready(argv, work, env)
            ran.append(command)
            continue
        r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert r.returncode == 0, f"README: {command}\nexit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        if redirect:
            (work / redirect).write_text(r.stdout, encoding="utf-8")
        ran.append(command)
    # what the commands were for is there
    answers = [json.loads(line) for line in (work / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == len(smoke) and all(a["answer"].strip() for a in answers)
    assert (work / "run.jsonl").stat().st_size > 0 and any((work / "report").iterdir())
    assert "[llm]" in (work / "preqrag.toml").read_text()
    assert len(ran) == len(commands) - sum(c.startswith(NEEDS_NETWORK) for c in commands)
