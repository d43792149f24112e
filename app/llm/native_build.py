"""The xllamacpp server compiled here for this CPU's AVX-512, with the prebuilt wheel as the fallback.

The prebuilt xllamacpp wheel on PyPI runs AVX2 kernels only (its `get_system_info()` reports AVX2, no
AVX512; its library holds no zmm instruction). Compiled from the sdist with AVX-512 + VNNI the same
server prefilled 1.27x and decoded 1.21x as fast on these machines, and a ~4,500-token call took 67 s
instead of 91 s (benchmarks/reports/runtime_speed.md). So `recollect setup` builds that wheel once, when
/proc/cpuinfo reports AVX-512 (about 15 minutes on 2 cores), and installs it:

- Flags are explicit: GGML_NATIVE would emit AMX, which dies with SIGILL here. The optional AVX-512
  extensions (VNNI, VBMI, BF16) follow the CPU's own flags, and the wheel's cache folder is keyed by the
  version and the full flag string: pip's wheel cache ignores CMAKE_ARGS, and a wheel built for another
  CPU (a restored CI cache) must never be picked up.
- The sdist's build fetches BoringSSL, llguidance (GitHub) and the web UI (Hugging Face) at configure
  time; none of them is reachable here and the local server needs none, so they are off. Without
  llguidance the `local_json_whitespace` options other than "flexible" cannot run, so those settings
  keep the prebuilt wheel.
- A failed build falls back to the prebuilt wheel with a message, and leaves a FAILED marker so the
  next `recollect setup` does not spend another build on it (delete the folder to retry).
- `RECOLLECT_LOCAL_CPU_FLAGS=avx2` forces the prebuilt wheel.

This module is also where the pieces every llama.cpp install shares live (the pinned xllamacpp version,
CPU flags, pip, the build spinner, the install error): app/llm/local_runtime.py imports them from here.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO
from urllib.parse import unquote, urlparse

from tqdm import tqdm

from recollect.settings import get_settings

log = logging.getLogger(__name__)

XLLAMACPP_VERSION = "2026.10.11549"
CMAKE_ARGS_AVX2 = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
AVX512_NEEDED = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"})
# Everything the sdist would otherwise download at configure time, off (see the module docstring).
OFFLINE_ARGS = "-DLLAMA_BUILD_BORINGSSL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_LLGUIDANCE=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
AMX_OFF = "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
# Optional AVX-512 extensions: the /proc/cpuinfo flag and the ggml option that uses it.
EXTENSIONS = (("avx512_vnni", "GGML_AVX512_VNNI"), ("avx512vbmi", "GGML_AVX512_VBMI"),
              ("avx512_bf16", "GGML_AVX512_BF16"))
FAILED = "FAILED"  # marker file in a wheel folder whose build failed
BUILD_MINUTES = 15  # the build took 15.5 min on 2 cores shared with another job

Echo = Callable[[str], object]


class LocalModelError(RuntimeError):
    """The embedded model or its runtime could not be installed or started."""


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The instruction-set flags of the first CPU in /proc/cpuinfo (empty when unreadable)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cache_dir() -> Path:
    path = Path(get_settings().cache_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    log.info("running %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LocalModelError(f"pip {' '.join(args[:3])} failed:\n{proc.stderr[-2000:]}")


def installed_version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def xllamacpp_installed() -> bool:
    """The pinned xllamacpp version is importable (prebuilt or compiled here: both carry that version)."""
    return importlib.util.find_spec("xllamacpp") is not None and installed_version("xllamacpp") == XLLAMACPP_VERSION


@contextlib.contextmanager
def spinner(desc: str) -> Iterator[Callable[[], object]]:
    bar = tqdm(desc=desc, unit=" lines", bar_format="{desc}: {n_fmt}{unit} [{elapsed}]")
    try:
        yield lambda: bar.update(1)
    finally:
        bar.close()



def xllamacpp_cmake_args(choice: str, flags: frozenset[str]) -> str | None:
    """The CMake flags to compile xllamacpp with, or None for the prebuilt AVX2 wheel.

    `choice` is the `local_cpu_flags` setting: avx2 = prebuilt; avx512 = compile even when the CPU does
    not report it (the user asked); auto = compile when the CPU has every flag of `_AVX512_NEEDED`.
    """
    if choice == "avx2" or (choice == "auto" and not flags >= AVX512_NEEDED):
        return None
    ext = " ".join(f"-D{option}={'ON' if flag in flags else 'OFF'}" for flag, option in EXTENSIONS)
    return f"{CMAKE_ARGS_AVX2} -DGGML_AVX512=ON {ext} {AMX_OFF} {OFFLINE_ARGS}"


def wheel_dir(args: str) -> Path:
    key = hashlib.sha256(args.encode()).hexdigest()[:10]
    return cache_dir() / "wheels" / f"xllamacpp-{XLLAMACPP_VERSION}-{key}"


def cached_wheel(wdir: Path) -> Path | None:
    wheels = sorted(wdir.glob(f"xllamacpp-{XLLAMACPP_VERSION}-*.whl"))
    return wheels[-1] if wheels else None


def installed_from() -> Path | None:
    """The local wheel file the installed xllamacpp came from (pip's direct_url.json); None from an index."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        text = distribution("xllamacpp").read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    url = urlparse(json.loads(text).get("url", "")) if text else None
    return Path(unquote(url.path)) if url and url.scheme == "file" else None


def check_json_whitespace() -> None:
    """Refuse a `local_json_whitespace` that needs llguidance when the installed xllamacpp is our build."""
    ws = get_settings().local_json_whitespace
    if ws != "flexible" and installed_from() is not None:
        raise LocalModelError(f"local_json_whitespace={ws} needs llguidance, which the xllamacpp compiled here "
                                 "lacks: rerun `recollect setup` with this setting (it installs the prebuilt "
                                 "wheel), or use local_json_whitespace=flexible")


def build_wheel(args: str, echo: Echo = print, log_lines: int = 60) -> Path:
    """Compile xllamacpp from its PyPI sdist with `args` into our wheel cache; return the wheel."""
    missing = [tool for tool in ("cmake", "make", "c++") if shutil.which(tool) is None]
    if missing:  # no FAILED marker: installing the tools is enough to try again
        raise LocalModelError(f"compiling xllamacpp needs {', '.join(missing)}, not found on PATH")
    wdir = wheel_dir(args)
    wdir.parent.mkdir(parents=True, exist_ok=True)
    echo(f"compiling xllamacpp {XLLAMACPP_VERSION} for this CPU (AVX-512, about {BUILD_MINUTES} min on "
         f"2 cores; once, cached in {wdir})…")
    # XLLAMACPP_RELEASE stops its build script from defaulting to GGML_NATIVE (our flags say OFF as well).
    env = dict(os.environ, CMAKE_ARGS=args, XLLAMACPP_RELEASE="1")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=wdir.parent) as tmp:
        # -v streams the compiler's lines, so the spinner and the progress lines move.
        cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "--no-cache-dir", "--no-deps",
               "--no-binary", "xllamacpp", "-v", "-w", tmp, f"xllamacpp=={XLLAMACPP_VERSION}"]
        build_log = cache_dir() / "logs" / f"{wdir.name}-build.log"  # the whole compiler output, kept
        build_log.parent.mkdir(parents=True, exist_ok=True)
        with open(build_log, "w") as out:
            code, tail = _run_with_progress(cmd, env, echo, started, log_lines, out)
        # Only our pinned version counts: runtime_installed() checks the installed version against it.
        built = sorted(Path(tmp).glob(f"xllamacpp-{XLLAMACPP_VERSION}-*.whl"))
        if code != 0 or not built:
            wdir.mkdir(parents=True, exist_ok=True)
            (wdir / FAILED).write_text(f"exit {code}, CMAKE_ARGS={args}\n" + "".join(tail))
            raise LocalModelError(f"compiling xllamacpp failed (exit {code}; whole log: {build_log}); its last "
                                  "lines:\n" + "".join(tail))
        wdir.mkdir(parents=True, exist_ok=True)
        for w in built:
            shutil.move(str(w), wdir / w.name)
    (wdir / "CMAKE_ARGS").write_text(args + "\n")
    (wdir / "BUILD_SECONDS").write_text(f"{time.monotonic() - started:.0f}\n")
    echo(f"compiled xllamacpp in {(time.monotonic() - started) / 60:.1f} min")
    wheel = cached_wheel(wdir)
    assert wheel is not None
    return wheel


def _run_with_progress(cmd: list[str], env: dict[str, str], echo: Echo, started: float, log_lines: int,
                       out: TextIO, every_s: float = 60.0) -> tuple[int, list[str]]:
    """Run the build: a spinner per output line, and once a minute the current step, for CI logs.

    Minutes rather than CMake's percentages: the build runs several targets and their percentages restart.
    """
    tail: list[str] = []
    last = time.monotonic()
    with spinner("compiling llama.cpp") as tick:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            tail = (tail + [line])[-log_lines:]
            tick()
            if (now := time.monotonic()) - last >= every_s:
                last = now
                echo(f"  compiling xllamacpp, {(now - started) / 60:.0f} min: {line.strip()[:100]}")
        return proc.wait(), tail


def _install_prebuilt(echo: Echo, reason: str = "", force: bool = False) -> None:
    # The local build has the same version, so pip would call the requirement satisfied: force it.
    if force or not xllamacpp_installed() or installed_from() is not None:
        echo(f"installing the prebuilt llama.cpp server (xllamacpp {XLLAMACPP_VERSION}, ~34 MB)…")
        run_pip("install", "-q", "--progress-bar", "off", "--force-reinstall", "--no-deps",
                f"xllamacpp=={XLLAMACPP_VERSION}")
    echo(f"llama.cpp runtime: xllamacpp {XLLAMACPP_VERSION} (prebuilt, AVX2){reason}")


def ensure_xllamacpp(echo: Echo = print, choice: str | None = None, flags: frozenset[str] | None = None,
                     build: Callable[[str, Echo], Path] = build_wheel) -> str:
    """Install the xllamacpp this CPU should run; returns "native" or "prebuilt" (what is installed now)."""
    settings = get_settings()
    args = xllamacpp_cmake_args(choice or settings.local_cpu_flags, cpu_flags() if flags is None else flags)
    if args is None:
        _install_prebuilt(echo)
        return "prebuilt"
    if settings.local_json_whitespace != "flexible":
        _install_prebuilt(echo, f": local_json_whitespace={settings.local_json_whitespace} needs llguidance, "
                                "which the AVX-512 build lacks")
        return "prebuilt"
    wdir = wheel_dir(args)
    source = installed_from()
    # The folder, not the file: a venv whose build came from a since-cleared cache needs no rebuild.
    if xllamacpp_installed() and source is not None and source.parent == wdir:
        echo(f"llama.cpp runtime: xllamacpp {XLLAMACPP_VERSION} (compiled here, AVX-512: {wdir.name})")
        return "native"
    wheel = cached_wheel(wdir)
    if wheel is None:
        if (wdir / FAILED).is_file():
            _install_prebuilt(echo, f": an earlier AVX-512 build failed (see {wdir / FAILED}; delete {wdir} "
                                    "to retry)")
            return "prebuilt"
        try:
            wheel = build(args, echo)
        except LocalModelError as exc:
            echo(f"{exc}\nthe AVX-512 build failed: falling back to the prebuilt AVX2 wheel (slower prefill)")
            _install_prebuilt(echo)
            return "prebuilt"
    echo(f"installing llama.cpp runtime from {wheel}")
    try:
        run_pip("install", "-q", "--force-reinstall", "--no-deps", str(wheel))
        _check_import()
    except LocalModelError as exc:
        echo(f"{exc}\nthe AVX-512 build does not install: falling back to the prebuilt AVX2 wheel")
        _install_prebuilt(echo, force=True)  # pip may have half-replaced the prebuilt one
        return "prebuilt"
    echo(f"llama.cpp runtime: xllamacpp {XLLAMACPP_VERSION} (compiled here, AVX-512: {wdir.name})")
    return "native"


def _check_import() -> None:
    """Load the installed library in a fresh interpreter: a wheel that cannot load must not stay installed."""
    proc = subprocess.run([sys.executable, "-c", "import xllamacpp; print(xllamacpp.get_system_info())"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or "AVX512 = 1" not in proc.stdout:
        raise LocalModelError(f"the installed xllamacpp does not load as an AVX-512 build:\n"
                                 f"{(proc.stdout + proc.stderr)[-1500:]}")
