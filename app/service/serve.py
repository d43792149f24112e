"""`recollect serve`: the LangGraph API server for every registered graph, and the embedded model it needs.

serve owns both processes: SIGTERM or Ctrl-C stops the LangGraph server and the embedded model's
server with it, and the port it prints is the port it serves (a taken port is a clear error).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from recollect.cli_args import CLIError


def _serve_port(asked: int) -> int:
    """The port to serve on: `asked` when it is free (0 = any free port), else a clear error.

    `langgraph dev` silently moves to another port when its port is taken; checking first means the
    URL printed is the URL served.
    """
    import socket

    from recollect.llm.local_runtime import free_port

    if asked == 0:
        return free_port()
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", asked))
        except OSError as exc:
            raise CLIError(f"port {asked} is already in use ({exc.strerror}); pass --port N, or --port 0 "
                           "for any free port") from None
    return asked


def _stop_group(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM a child's whole process group, then SIGKILL what is left after `grace_s`."""
    import signal

    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers the leader left in its group
            return
        except subprocess.TimeoutExpired:
            continue


def cmd_serve(args: argparse.Namespace) -> int:
    import importlib.util
    import signal
    import urllib.request

    from recollect.llm.local_runtime import LocalServer, model_verified, runtime_installed
    from recollect.settings import get_settings

    if importlib.util.find_spec("langgraph_cli") is None or importlib.util.find_spec("langgraph_api") is None:
        raise CLIError("`recollect serve` needs the LangGraph server: pip install 'recollect[serve]'")
    port = _serve_port(args.port)
    env = dict(os.environ, LANGGRAPH_CLI_NO_ANALYTICS="1", LANGGRAPH_NO_VERSION_CHECK="true",
               ANONYMIZED_TELEMETRY="False")
    env.setdefault("LANGSMITH_TRACING", "false")  # offline by default; a user who turned tracing on keeps it
    if args.data_dir:
        env["RECOLLECT_DATA_DIR"] = args.data_dir
    from recollect.service.config import graph_names, write_server_config

    # The server's own directory (its config and run queue) lives under the data directory: from a wheel
    # there is no checkout to run in, and site-packages must stay read-only.
    server_dir = Path(args.data_dir or get_settings().data_dir).expanduser() / "server"
    try:
        config = write_server_config(server_dir)
    except OSError as exc:
        raise CLIError(f"cannot write the server's config under {server_dir}: {exc.strerror or exc}") from None
    # The same interpreter as this command: from a wheel in a venv that is not activated, a `langgraph`
    # on PATH may belong to another environment (or be missing).
    cmd = [sys.executable, "-m", "langgraph_cli", "dev", "--config", str(config),
           "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload", "--allow-blocking"]

    def _on_signal(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM takes the same clean-up path as Ctrl-C

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    local: LocalServer | None = None
    proc: subprocess.Popen | None = None
    url = f"http://127.0.0.1:{port}"
    try:
        if not get_settings().llm_base_url and runtime_installed() and model_verified():
            # serve owns the embedded model's server, so stopping serve stops it too (started inside
            # `langgraph dev` it would outlive a killed server process).
            local = LocalServer().start()
            env.update(RECOLLECT_LLM_BASE_URL=local.base_url, RECOLLECT_LLM_MODEL=local.spec.alias,
                       RECOLLECT_LLM_API_KEY="local")
        proc = subprocess.Popen(cmd, env=env, cwd=server_dir, start_new_session=True)
        while proc.poll() is None:
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/ok", timeout=2):
                graphs = ", ".join(graph_names())
                print(f"serving {graphs} on {url}", flush=True)
                break
            time.sleep(0.5)
        code = proc.wait()
        if code != 0:
            raise CLIError(f"the LangGraph server exited with status {code} (see its log above)")
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        if proc is not None:
            _stop_group(proc)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if local is not None:
            local.stop()
