"""llama.cpp's own C++ server from the prebuilt `xllamacpp` wheel, as a blocking process.

    python -m recollect.llm.xllamacpp_server --model GGUF --alias NAME --port N [--n-ctx 8192] [--threads 2]
                                       [--parallel 1] [--cache-ram-mib 2048]

Why this server rather than llama-cpp-python's: it installs from PyPI as a wheel (no 9-minute compile on
a fresh machine), decodes in C++ (llama-cpp-python samples in Python between tokens), and it keeps the
KV of earlier prompts: the slot's own prompt plus a host-memory prompt cache (`--cache-ram-mib`), so a
call that shares a prefix with *any* recent call, not only the last one, skips that prefix's prefill.
The OpenAI-compatible API (`/v1/chat/completions` with `response_format` json_object + schema, `/v1/models`)
is the one the rest of the project already speaks. `LocalServer` starts this module under the orphan guard.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any


def build_params(args: argparse.Namespace) -> Any:  # xllamacpp.CommonParams (an untyped extension class)
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.model_alias = {args.alias}
    if hasattr(p, "hostnames"):
        p.hostnames = ["127.0.0.1"]
    else:  # releases before 2026.10 take one host (benchmarks/runtime_numerics.py serves them)
        p.hostname = "127.0.0.1"
    p.port = args.port
    p.n_parallel = args.parallel
    # Each slot gets n_ctx / n_parallel unless the KV cache is unified; unified lets one long prompt use
    # the whole context while other slots are idle.
    p.n_ctx = args.n_ctx * args.parallel
    p.kv_unified = True
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.cache_prompt = True
    p.cache_ram_mib = args.cache_ram_mib
    p.endpoint_metrics = True
    p.endpoint_slots = True
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m recollect.llm.xllamacpp_server")
    ap.add_argument("--model", required=True)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--cache-ram-mib", type=int, default=2048)
    return ap.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    import xllamacpp

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xllamacpp.Server(build_params(args))  # serves HTTP on its own threads from here on
    print(f"xllamacpp server listening on {server.listening_address}", flush=True)
    stop.wait()
    del server  # the destructor stops the HTTP threads and the main loop


if __name__ == "__main__":
    main(sys.argv[1:])
