"""Real storage services for tests/storage, started by the tests: Postgres with pgvector through `pgserver`
(PyPI: a Postgres build in a wheel, no system install), in a temporary directory, stopped and deleted at the
end. A service that cannot start fails the tests that need it, with the reason; nothing is skipped or mocked.

pgserver runs as any user: as root (CI) it creates a `pgserver` system user and runs Postgres as that, since
Postgres refuses to run as root.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recollect.memory.backends import close_postgres
from recollect.settings import get_settings
from tests.helpers import stop_process_group


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        import pgserver
    except ImportError as exc:
        pytest.fail(f"pgserver is not installed ({exc}); `make venv` installs it (the dev extra)", pytrace=False)
    pgdata = tmp_path_factory.mktemp("postgres") / "pgdata"
    try:
        server = pgserver.get_server(pgdata, cleanup_mode="delete")
    except Exception as exc:  # initdb or pg_ctl failed: say why, with the server's log
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log written)"
        pytest.fail(f"Postgres did not start through pgserver in {pgdata}: {type(exc).__name__}: {exc}\n{tail}",
                    pytrace=False)
    import psycopg

    # A throwaway server: no fsync, so creating a database per test and the shutdown checkpoint do not wait on
    # the disk (what the tests check, transactions and visibility across connections, does not depend on it).
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield server
    finally:
        close_postgres()  # the pools, before the server they connect to goes away
        server.cleanup()


@pytest.fixture
def postgres_uri(postgres_server: Any) -> Iterator[str]:
    """A new, empty database on the server, set as RECOLLECT_POSTGRES_URI for one test."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    uri = postgres_server.get_uri(name)
    before = os.environ.get("RECOLLECT_POSTGRES_URI")
    os.environ["RECOLLECT_POSTGRES_URI"] = uri
    get_settings.cache_clear()
    try:
        yield uri
    finally:
        close_postgres()
        if before is None:
            os.environ.pop("RECOLLECT_POSTGRES_URI", None)
        else:
            os.environ["RECOLLECT_POSTGRES_URI"] = before
        get_settings.cache_clear()


# --- a Chroma server (`chroma run`) of the tests' own -----------------------------------------------
START_TIMEOUT_S = 60.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(log: Path, chars: int = 3000) -> str:
    text = ANSI.sub("", log.read_text(errors="replace")) if log.exists() else "(no log)"
    return text[-chars:]


def server_client(url: str) -> Any:
    import chromadb
    from chromadb.config import Settings

    host, port = url.removeprefix("http://").split(":")
    return chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `chroma run` server of its own, on a free port; any failure to start fails with its log."""
    root = tmp_path_factory.mktemp("chroma-server")
    chroma = Path(sys.executable).parent / "chroma"
    command = str(chroma) if chroma.exists() else shutil.which("chroma")
    if command is None:
        pytest.fail(f"cannot start a Chroma server: no `chroma` script beside {sys.executable} or on PATH", pytrace=False)
    port, log = _free_port(), root / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([command, "run", "--path", str(root / "db"), "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline, last = time.monotonic() + START_TIMEOUT_S, "no answer yet"
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the Chroma server exited with status {proc.returncode} before answering; "
                            f"log tail:\n{_log_tail(log)}", pytrace=False)
            try:
                server_client(url).heartbeat()
                break
            except Exception as exc:  # not listening yet
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                pytest.fail(f"the Chroma server at {url} gave no heartbeat within {START_TIMEOUT_S:.0f}s "
                            f"({last}); log tail:\n{_log_tail(log)}", pytrace=False)
            time.sleep(0.25)
        yield url
    finally:
        stop_process_group(proc, grace_s=10)
