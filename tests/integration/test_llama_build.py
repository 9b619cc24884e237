"""The installed llama.cpp runs on any x86-64 CPU: portable (CPU variants chosen at run
time), and no AMX instruction anywhere in it (AMX is advertised by CPUs that cannot run it:
SIGILL in libggml-cpu). Fails on a machine without AMX too, since it reads the files."""

from __future__ import annotations

import os

import platform
import shutil
import subprocess

import pytest

from preqrag.models.llm import llama_build

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 builds only")


@pytest.fixture(scope="module")
def libdir():
    d = llama_build.lib_dir()
    assert d is not None, "llama-cpp-python is not installed; run ./install.sh"
    return d


def test_scanner_finds_amx_instructions(tmp_path, monkeypatch):
    """The AMX scan is real: an object built with AMX intrinsics is caught; its result is cached
    by the file's content."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    src = tmp_path / "amx.c"
    src.write_text("#include <immintrin.h>\nvoid f(void *p) { _tile_loadd(1, p, 64); _tile_release(); }\n")
    obj = tmp_path / "amx.o"
    subprocess.run(["gcc", "-O2", "-mamx-tile", "-c", str(src), "-o", str(obj)], check=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert llama_build.amx_instructions(obj) == ["tileloadd", "tilerelease"]
    # the scan is kept per sha256 of the file: the same bytes are not disassembled again ...
    monkeypatch.setattr(llama_build.shutil, "which", lambda name: None)
    assert llama_build.amx_instructions(obj) == ["tileloadd", "tilerelease"]
    # ... other bytes are (and here objdump is "missing")
    obj.write_bytes(obj.read_bytes() + b"\0")
    with pytest.raises(llama_build.LlamaBuildError, match="objdump not found"):
        llama_build.amx_instructions(obj)


def test_installed_llama_cpp_is_portable(libdir):
    assert llama_build.is_portable(libdir), (
        f"{libdir} holds a natively compiled llama.cpp (libggml-cpu.so); install with ./install.sh")
    names = {p.name for p in llama_build.cpu_variants(libdir)}
    for level in ("x64", "haswell", "skylakex", "icelake", "zen4"):
        assert f"libggml-cpu-{level}.so" in names


def test_installed_llama_cpp_has_no_amx_instructions(libdir):
    libs = [p for p in sorted(libdir.iterdir()) if p.is_file() and ".so" in p.name]
    assert libs
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # one objdump per core
        found = dict(zip((p.name for p in libs), pool.map(llama_build.amx_instructions, libs)))
    assert {k: v for k, v in found.items() if v} == {}


def test_variant_chosen_matches_this_cpu(libdir):
    flags = set(open("/proc/cpuinfo").read().split())
    scores = llama_build.variant_scores(libdir)
    best = llama_build.best_cpu_variant(libdir)
    assert best is not None and scores[best.name] > 0
    assert scores["libggml-cpu-x64.so"] > 0  # the baseline runs everywhere
    if "avx2" in flags:
        assert scores["libggml-cpu-haswell.so"] > 0
        assert best.name != "libggml-cpu-x64.so"
    if "avx512f" in flags:
        assert scores["libggml-cpu-skylakex.so"] > 0
    else:  # a variant this CPU cannot run is never chosen
        assert scores["libggml-cpu-skylakex.so"] == 0 and "avx512" not in best.name
    assert llama_build.server_env({})["GGML_BACKEND_PATH"] == str(best)


def test_llama_cpp_generates_with_the_portable_build():
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(LLMConfig(n_ctx=512))
    reply = llm.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert isinstance(reply, str) and reply.strip()


def test_other_programs_load_the_installed_build_without_help(libdir, tmp_path):
    """Installing preqrag must not break the user's other tools (issue 25): a plain
    ``llama_cpp.Llama(model_path=...)`` in a fresh process, started elsewhere than
    site-packages, with no ``GGML_BACKEND_PATH`` and nothing of preqrag imported, loads the
    bundled SmolLM2 GGUF and generates (the build compiles its absolute variant directory in)."""
    import os
    import sys

    from preqrag.core.config import LLMConfig
    from preqrag.models.files import resolve

    gguf = resolve(LLMConfig().model).location
    program = ("import sys; from llama_cpp import Llama; "
               "m = Llama(model_path=sys.argv[1], n_ctx=256, verbose=False); "
               "out = m.create_completion('The capital of France is', max_tokens=6, temperature=0.0); "
               "print(repr(out['choices'][0]['text'])); "
               "assert 'preqrag' not in sys.modules")
    env = {k: v for k, v in os.environ.items() if k not in ("GGML_BACKEND_PATH", "PYTHONPATH")}
    r = subprocess.run([sys.executable, "-c", program, str(gguf)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() not in ("", "''"), r.stdout
    assert llama_build.backend_dir_compiled_in(libdir)
