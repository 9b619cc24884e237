"""A llama.cpp that runs on any x86-64 CPU: the portable build of llama-cpp-python.

Why: llama-cpp-python compiles llama.cpp from source with ``GGML_NATIVE=ON``
(``-march=native``), so the library only runs on CPUs like the one it was built on. On a VM
whose CPUID advertises AMX without the OS enabling it (Sapphire-Rapids-class cloud
machines), that build dies with SIGILL in ``libggml-cpu`` (``tileloadd``), and pip's wheel
cache hands the same native wheel to every later install.

The portable build (``install.sh`` does it) sets :data:`PORTABLE_CMAKE_ARGS`:

* ``GGML_NATIVE=OFF``: nothing is compiled for the build machine's CPU;
* ``GGML_BACKEND_DL=ON`` + ``GGML_CPU_ALL_VARIANTS=ON``: ggml's CPU backend is built once
  per x86 micro-architecture level (x64, SSE4.2, AVX, AVX2 "haswell", AVX-512 "skylakex",
  "icelake", "zen4", ...) as ``libggml-cpu-<variant>.so``; at run time ggml scores each
  variant against the CPU (``ggml_backend_score``) and loads the best one, so an AVX-512
  machine gets AVX-512 kernels and an AVX2 machine the AVX2 ones;
* ``-U__AMX_TILE__ -U__AMX_INT8__ -U__AMX_BF16__``: ggml's AMX kernels are compiled only
  when these macros are defined (``ggml-cpu/amx/*.cpp``, ``ggml-cpu.c``), so the
  "sapphirerapids" variant becomes AVX-512-BF16/VNNI code with no AMX instruction in it.
  AMX stays out because a CPU that advertises it may not run it (the SIGILL above);
  :func:`amx_instructions` checks the installed files (tests/integration/test_llama_build.py);
* ``GGML_BACKEND_DIR:STRING=llama_cpp/lib``: the variants are installed beside ``libllama.so``
  (typed STRING: as an untyped PATH, CMake would make it absolute against the build's
  working directory, a temporary directory, and the variants would not reach the wheel);
* ``LLAVA_BUILD=OFF``: no multimodal (mtmd) library, which preqrag never loads
  (llama-cpp-python imports it only for its llava chat handlers); saves build time.

Where ggml looks for the variants: llama.cpp calls ``ggml_backend_load_all()`` when no
backend is registered, which searches the compile-time ``GGML_BACKEND_DIR``, the Python
executable's directory and the working directory (``ggml-backend-reg.cpp``,
``ggml_backend_load_best``). The CMake variable above must stay relative (it is also the
install destination inside the wheel), and a relative directory is resolved against the
working directory at run time, so on its own it works only from ``site-packages``: any other
program (Haystack's ``LlamaCppChatGenerator``, a plain ``llama_cpp.Llama(model_path=...)``)
would find no CPU backend (issue 25). :func:`cmake_args` therefore also compiles the
*absolute* directory the package will be installed to (``sysconfig``'s ``platlib`` +
``llama_cpp/lib``) into the search path: ``-DGGML_BACKEND_DIR="..."`` appended to
``CMAKE_CXX_FLAGS`` comes after CMake's own definition on the compiler's command line
(CMake's rule is ``$DEFINES $INCLUDES $FLAGS``), so it wins (GCC warns that the macro is
redefined). :func:`backend_dir_compiled_in` checks the result from another directory, so
every program in the environment loads the best variant for its CPU with no environment
variable. As a second line of defence, :func:`load_backends` loads the variants
from the package before llama.cpp starts (:class:`preqrag.models.llm.llamacpp.LlamaCppLLM` calls
it; this covers an environment moved after the build), and :func:`server_env` gives a
``python -m llama_cpp.server`` child process the chosen variant (``GGML_BACKEND_PATH``).

This file uses the standard library only, so ``install.sh`` runs it before preqrag is
installed: ``python src/preqrag/models/llm/llama_build.py cmake-args|check|info``.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
"""The pinned binding (vendors llama.cpp; see its CMakeLists)."""

PORTABLE_CMAKE_ARGS = [
    "-DGGML_NATIVE=OFF",
    "-DGGML_BACKEND_DL=ON",
    "-DGGML_CPU_ALL_VARIANTS=ON",
    "-DGGML_BACKEND_DIR:STRING=llama_cpp/lib",
    "-DLLAVA_BUILD=OFF",
    "-DCMAKE_C_FLAGS=-U__AMX_TILE__ -U__AMX_INT8__ -U__AMX_BF16__",
    "-DCMAKE_CXX_FLAGS=-U__AMX_TILE__ -U__AMX_INT8__ -U__AMX_BF16__",
]
"""CMake options of the portable build (module docstring says why each)."""


def install_lib_dir() -> Path:
    """Where pip will put llama-cpp-python's libraries in the running interpreter's
    environment: ``sysconfig.get_paths()["platlib"]/llama_cpp/lib``."""
    return Path(sysconfig.get_paths()["platlib"]) / "llama_cpp" / "lib"


def cmake_args(backend_dir: Path | None = None) -> list[str]:
    """:data:`PORTABLE_CMAKE_ARGS` with ``backend_dir`` (default :func:`install_lib_dir`)
    compiled into ggml's backend search path (module docstring: why and how).

    Raises:
        LlamaBuildError: the directory holds a quote or backslash (it cannot be a C literal
            on a shell command line).
    """
    d = str(backend_dir or install_lib_dir())
    if any(ch in d for ch in "\"'\\"):
        raise LlamaBuildError(f"cannot compile a backend directory with quotes or backslashes into llama.cpp: "
                              f"{d!r}")
    define = shlex.quote(f'-DGGML_BACKEND_DIR="{d}"')
    return [f"{a} {define}" if a.startswith("-DCMAKE_CXX_FLAGS=") else a for a in PORTABLE_CMAKE_ARGS]


def backend_dir_compiled_in(libdir: Path) -> bool:
    """True when a program that knows nothing of preqrag finds the CPU variants: in a fresh
    process started in the filesystem root, with no ``GGML_BACKEND_PATH``, ggml's own
    ``ggml_backend_load_all()`` (what llama.cpp calls when no backend is registered) registers
    a backend. The compiled-in directory cannot be read from the file (the compiler stores
    the string in pieces), so it is tried, as llama.cpp would use it."""
    probe = ("import ctypes, sys; g = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL); "
             "g.ggml_backend_reg_count.restype = ctypes.c_size_t; g.ggml_backend_load_all(); "
             "print(g.ggml_backend_reg_count())")
    lib = _soname_file(libdir, "libggml")
    if not lib.exists():
        return False
    env = {k: v for k, v in os.environ.items() if k != "GGML_BACKEND_PATH"}
    r = subprocess.run([sys.executable, "-c", probe, str(lib)], capture_output=True, text=True, cwd=os.sep,
                       env=env, timeout=120)
    return r.returncode == 0 and r.stdout.strip() not in ("", "0")


AMX_MNEMONICS = re.compile(r"\b(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd(?:t1)?|tilestored|"
                           r"tdpb[su][su]d|tdpbf16ps|tdpfp16ps|tcmmimfp16ps|tcmmrlfp16ps)\b")
"""Every AMX instruction (Intel SDM vol. 2, AMX-TILE/INT8/BF16/FP16/COMPLEX)."""


class LlamaBuildError(RuntimeError):
    """The installed llama.cpp cannot be used here (missing, native, or contains AMX)."""


def lib_dir() -> Path | None:
    """The llama.cpp libraries llama-cpp-python loads: ``$LLAMA_CPP_LIB_PATH`` when set (its
    own override), else ``site-packages/llama_cpp/lib`` (found without importing), or None."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override) if Path(override).is_dir() else None
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "lib"
    return d if d.is_dir() else None


def _suffix() -> str:
    return {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")


def _soname_file(libdir: Path, stem: str) -> Path:
    """The file of library ``stem`` that the other libraries link to (``libggml.so.0``).

    A wheel holds copies, not symlinks: ``libggml.so``, ``libggml.so.0`` and
    ``libggml.so.0.25.3`` are three files. Loading one that llama.cpp did not load would
    make a second, separate ggml instance; the SONAME file is the one it loads.
    """
    majors = sorted(p for p in libdir.glob(f"{stem}{_suffix()}.*") if p.name.count(".") == 2)
    return majors[0] if majors else libdir / f"{stem}{_suffix()}"


def cpu_variants(libdir: Path) -> list[Path]:
    """The ``libggml-cpu-<variant>`` modules of a portable build (empty for a native one)."""
    return sorted(p for p in libdir.glob(f"*ggml-cpu-*{_suffix()}") if p.is_file())


def is_portable(libdir: Path) -> bool:
    """True when the CPU backend is a set of run-time-chosen variants, not one native library."""
    native = [p for p in libdir.glob(f"*ggml-cpu{_suffix()}*") if p.is_file()]
    return bool(cpu_variants(libdir)) and not native


def amx_instructions(path: Path) -> list[str]:
    """AMX mnemonics found in a shared library's disassembly (``objdump -d``), sorted, unique.

    The result depends on the file's bytes only, so it is kept per sha256 of the file in
    ``~/.cache/preqrag/amx-scan/`` (``$XDG_CACHE_HOME``): disassembling the ~40 MB of a portable
    build takes ~15 s on 2 cores, and a fresh environment that installs the same cached wheel
    (CI, install.sh) holds the same bytes. A changed file has another hash and is scanned again.

    Raises:
        LlamaBuildError: objdump (GNU binutils) is not installed.
    """
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "preqrag" / "amx-scan" / f"{digest}.json"
    try:
        return json.loads(cache.read_text())["amx"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    objdump = shutil.which("objdump")
    if objdump is None:
        raise LlamaBuildError("objdump not found (install binutils) to scan for AMX instructions")
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], check=True,
                         capture_output=True, text=True, errors="replace").stdout
    found = sorted(set(AMX_MNEMONICS.findall(out)))
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"file": Path(path).name, "amx": found}))
        os.replace(tmp, cache)
    except OSError:  # a read-only home: the scan stands, uncached
        pass
    return found


def _load_base(libdir: Path) -> None:
    """Load ``libggml-base`` globally: the variants need it and carry no RPATH to find it
    (llama-cpp-python sets ``$ORIGIN`` only on the libraries it installs itself)."""
    base = _soname_file(libdir, "libggml-base")
    if base.exists():
        ctypes.CDLL(str(base), mode=getattr(ctypes, "RTLD_GLOBAL", 0))


def variant_scores(libdir: Path) -> dict[str, int]:
    """``ggml_backend_score()`` of every CPU variant on this CPU (0 = cannot run here).

    This is ggml's own check (``ggml-cpu/arch/x86/cpu-feats.cpp``: CPUID against the
    variant's compile-time features); ggml loads the highest-scoring variant.
    """
    scores = {}
    _load_base(libdir)
    for p in cpu_variants(libdir):
        lib = ctypes.CDLL(str(p))
        fn = getattr(lib, "ggml_backend_score", None)
        if fn is None:
            continue
        fn.restype = ctypes.c_int
        scores[p.name] = int(fn())
    return scores


def best_cpu_variant(libdir: Path) -> Path | None:
    """The variant ggml would load on this CPU, or None (no portable build, or none runs)."""
    scores = variant_scores(libdir)
    if not scores or max(scores.values()) <= 0:
        return None
    return libdir / max(scores, key=lambda k: scores[k])


def load_backends() -> str | None:
    """Register llama.cpp's CPU backend from the installed package before llama.cpp starts.

    Works before or after ``import llama_cpp`` (it registers the backend in the ggml that
    llama.cpp itself loaded: :func:`_soname_file`).

    A native build links its CPU backend in (nothing to do); a portable build's variants are
    loaded with ``ggml_backend_load_all_from_path(llama_cpp/lib)``, which picks the best for
    this CPU. Idempotent.

    Returns:
        The chosen variant's file name (portable build) or None (native build / not installed).

    Raises:
        LlamaBuildError: a portable build with no variant that runs on this CPU.
    """
    libdir = lib_dir()
    if libdir is None or not is_portable(libdir):
        return None
    ggml = ctypes.CDLL(str(_soname_file(libdir, "libggml")), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    best = best_cpu_variant(libdir)
    if best is None:
        raise LlamaBuildError(f"no llama.cpp CPU variant in {libdir} runs on this CPU")
    if ggml.ggml_backend_reg_count() == 0:
        ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        ggml.ggml_backend_load_all_from_path(str(libdir).encode())
    return best.name


def server_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a ``python -m llama_cpp.server`` child: with a portable build,
    ``GGML_BACKEND_PATH`` names the CPU variant for this CPU (ggml loads it at start)."""
    env = dict(os.environ if env is None else env)
    libdir = lib_dir()
    if libdir is not None and is_portable(libdir) and "GGML_BACKEND_PATH" not in env:
        best = best_cpu_variant(libdir)
        if best is not None:
            env["GGML_BACKEND_PATH"] = str(best)
    return env


def check(scan: bool = True) -> dict:
    """What is installed: ``{"lib_dir", "portable", "variants", "backend_dir_compiled_in", "best", "amx"}``.

    Raises:
        LlamaBuildError: llama-cpp-python missing, a native build, the absolute backend
            directory not compiled in, or AMX found (``scan``).
    """
    libdir = lib_dir()
    if libdir is None:
        raise LlamaBuildError(f"llama-cpp-python is not installed ({LLAMA_CPP_PYTHON}); run ./install.sh")
    info = {"lib_dir": str(libdir), "portable": is_portable(libdir),
            "variants": [p.name for p in cpu_variants(libdir)]}
    if not info["portable"]:
        raise LlamaBuildError(
            f"{libdir} holds a llama.cpp built for the CPU it was compiled on (GGML_NATIVE); it may die "
            "with SIGILL on another CPU. Rebuild it portable: ./install.sh")
    info["backend_dir_compiled_in"] = backend_dir_compiled_in(libdir)  # a process probe: only for a portable build
    if not info["backend_dir_compiled_in"]:
        raise LlamaBuildError(
            f"{libdir} is not ggml's compiled-in backend directory: programs other than preqrag would "
            "load no CPU backend (an older build, or the environment moved). Rebuild it: ./install.sh")
    best = best_cpu_variant(libdir)
    info["best"] = best.name if best else None
    if scan:
        found = {p.name: amx_instructions(p) for p in sorted(libdir.glob(f"*{_suffix()}*")) if p.is_file()}
        info["amx"] = {k: v for k, v in found.items() if v}
        if info["amx"]:
            raise LlamaBuildError(f"AMX instructions in {libdir}: {info['amx']}")
    return info


def wheel_cache_dir() -> Path:
    """Where ``install.sh`` keeps the portable wheel it built, so that a fresh virtual
    environment at the same path (CI makes one on every run) installs it in seconds instead
    of compiling llama.cpp again (15-25 min on 2 cores).

    ``$PREQRAG_WHEEL_CACHE`` (default ``$XDG_CACHE_HOME/preqrag/wheels``, i.e.
    ``~/.cache/preqrag/wheels``) / a key: the sha256 (first 16 hex digits) of the pinned
    binding, the Python tag and :func:`cmake_args` -- which hold the absolute directory the
    libraries are installed to, so a wheel is only reused where its compiled-in backend
    directory is right. Only portable builds are ever put there (pip's own wheel cache,
    which may hold a native build, is bypassed: module docstring).
    """
    import hashlib

    root = os.environ.get("PREQRAG_WHEEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "preqrag", "wheels")
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    key = hashlib.sha256("\n".join([LLAMA_CPP_PYTHON, tag, *cmake_args()]).encode()).hexdigest()[:16]
    return Path(root) / key


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "info"
    if cmd == "cmake-args":
        print(" ".join(shlex.quote(a) for a in cmake_args()))
        return 0
    if cmd == "wheel-cache":
        print(wheel_cache_dir())
        return 0
    if cmd in ("check", "quick-check"):
        try:
            info = check(scan=cmd == "check")
        except LlamaBuildError as e:
            print(f"llama.cpp: {e}", file=sys.stderr)
            return 1
        print(json.dumps(info))
        return 0
    if cmd == "info":
        libdir = lib_dir()
        print(json.dumps({"lib_dir": str(libdir) if libdir else None,
                          "portable": bool(libdir and is_portable(libdir)),
                          "scores": variant_scores(libdir) if libdir else {}}, indent=2))
        return 0
    print("usage: llama_build.py cmake-args|wheel-cache|check|quick-check|info", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
