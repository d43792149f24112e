"""`recollect serve`: the LangGraph API server for every registered graph, and the embedded model it needs.

serve owns both processes: SIGTERM or Ctrl-C stops the LangGraph server and the embedded model's
server with it, and the port it prints is the port it serves (a taken port is a clear error). It binds
127.0.0.1 unless told otherwise, and refuses any other address without an auth file: a server other machines
can reach answers only requests carrying an API key (recollect.service.auth).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from recollect.cli_args import CLIError

DEFAULT_HOST = "127.0.0.1"


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """`recollect serve`'s options."""
    parser.add_argument("--port", type=int, default=2024, help="port to serve on (0 = any free port)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help="address to bind (default 127.0.0.1); any other than loopback needs --auth-file")
    parser.add_argument("--auth-file", help="JSON file mapping API keys to a user and its namespaces; turns "
                                            "per-user auth on (default: $RECOLLECT_AUTH_FILE)")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _auth_file(args: argparse.Namespace, host: str) -> str | None:
    """The auth file to serve with (absolute: the server runs in another directory), checked now so a bad
    file is one clear error; a non-loopback host without one is refused."""
    from recollect.service.access import AuthFileError, load_auth_file
    from recollect.settings import get_settings

    path = getattr(args, "auth_file", None) or get_settings().auth_file
    if not path:
        if not is_loopback(host):
            raise CLIError(f"--host {host} lets other machines reach the server: pass --auth-file FILE (or set "
                           "RECOLLECT_AUTH_FILE) so that every request needs an API key")
        return None
    try:
        load_auth_file(path)
    except AuthFileError as exc:
        raise CLIError(str(exc)) from None
    return str(Path(path).expanduser().resolve())


def _serve_port(asked: int, host: str = DEFAULT_HOST) -> int:
    """The port to serve on: `asked` when it is free (0 = any free port), else a clear error.

    `langgraph dev` silently moves to another port when its port is taken; checking first means the
    URL printed is the URL served.
    """
    import socket

    from recollect.llm.local_runtime import free_port

    if not 0 <= asked <= 65535:
        raise CLIError(f"--port {asked}: a port is 0-65535 (0 = any free port)")
    if asked == 0:
        return free_port()
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host.strip("[]"), asked))
        except socket.gaierror as exc:
            raise CLIError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
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
    host = getattr(args, "host", None)
    if host is None:
        host = DEFAULT_HOST
    if not host.strip():  # else it would serve on the default address without a word
        raise CLIError("--host is empty: name an address (default 127.0.0.1)")
    auth_file = _auth_file(args, host)
    port = _serve_port(args.port, host)
    env = dict(os.environ, LANGGRAPH_CLI_NO_ANALYTICS="1", LANGGRAPH_NO_VERSION_CHECK="true",
               ANONYMIZED_TELEMETRY="False")
    env.setdefault("LANGSMITH_TRACING", "false")  # offline by default; a user who turned tracing on keeps it
    if args.data_dir:
        env["RECOLLECT_DATA_DIR"] = args.data_dir
    env.pop("RECOLLECT_AUTH_FILE", None)
    if auth_file:
        env["RECOLLECT_AUTH_FILE"] = auth_file
    from recollect.service.config import graph_names, write_server_config

    # The server's own directory (its config and run queue) lives under the data directory: from a wheel
    # there is no checkout to run in, and site-packages must stay read-only.
    server_dir = Path(args.data_dir or get_settings().data_dir).expanduser() / "server"
    try:
        config = write_server_config(server_dir, auth_on=auth_file is not None)
    except OSError as exc:
        raise CLIError(f"cannot write the server's config under {server_dir}: {exc.strerror or exc}") from None
    # The same interpreter as this command: from a wheel in a venv that is not activated, a `langgraph`
    # on PATH may belong to another environment (or be missing).
    cmd = [sys.executable, "-m", "langgraph_cli", "dev", "--config", str(config),
           "--host", host, "--port", str(port), "--no-browser", "--no-reload", "--allow-blocking"]

    def _on_signal(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM takes the same clean-up path as Ctrl-C

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    local: LocalServer | None = None
    proc: subprocess.Popen | None = None
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    url = f"http://{shown}:{port}"
    # 0.0.0.0 / :: are bind-all addresses, not ones to connect to: probe the server on loopback
    probe = f"http://127.0.0.1:{port}" if host in ("0.0.0.0", "::", "[::]") else url
    try:
        if not get_settings().llm_base_url and runtime_installed() and model_verified():
            # serve owns the embedded model's server, so stopping serve stops it too (started inside
            # `langgraph dev` it would outlive a killed server process).
            local = LocalServer().start()
            env.update(RECOLLECT_LLM_BASE_URL=local.base_url, RECOLLECT_LLM_MODEL=local.spec.alias,
                       RECOLLECT_LLM_API_KEY="local")
        proc = subprocess.Popen(cmd, env=env, cwd=server_dir, start_new_session=True)
        while proc.poll() is None:
            with contextlib.suppress(OSError), urllib.request.urlopen(probe + "/ok", timeout=2):
                graphs = ", ".join(graph_names())
                print(f"auth: API keys from {auth_file}" if auth_file else "auth: off (loopback only)", flush=True)
                print(f"serving {graphs} on {url}", flush=True)  # the URL ends the line: scripts read it
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
