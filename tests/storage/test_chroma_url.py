"""RECOLLECT_CHROMA_URL when it cannot work: a server that does not answer or a malformed URL is one
`error:` line naming the URL; RECOLLECT_CHROMA_TOKEN travels as Chroma's token auth header."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from recollect.cli import main
from recollect.memory.workspace import VectorServerError, chroma_server_client, open_workspace
from recollect.settings import get_settings


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chroma_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield monkeypatch
    monkeypatch.delenv("RECOLLECT_CHROMA_URL", raising=False)
    get_settings.cache_clear()


def test_an_unreachable_server_is_one_error_line(chroma_env: pytest.MonkeyPatch, data_dir: str, sample_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    chroma_env.setenv("RECOLLECT_CHROMA_URL", url)
    get_settings.cache_clear()
    assert main(["--data-dir", data_dir, "ingest", str(sample_path), "-n", "demo", "--methods", "memr3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot reach the Chroma server at {url} (")
    assert "RECOLLECT_CHROMA_URL" in err[0]
    assert not (Path(data_dir) / "chroma").exists()
    docs = open_workspace(data_dir).docs  # the ingest failed before writing any document
    assert docs.count("demo", "turn") == 0 and docs.namespaces() == []


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://host:8000", "http://host:99999", "http://host/sub/path"])
def test_a_malformed_url_names_the_form(url: str) -> None:
    with pytest.raises(VectorServerError, match=rf"Chroma server URL '{url}' (is malformed|is not of the form)"):
        chroma_server_client(url)


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.seen.append(dict(self.headers))
        self.send_response(503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_token_goes_as_a_bearer_header_and_never_into_the_error() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(VectorServerError, match=f"cannot reach the Chroma server at {url}") as failed:
            chroma_server_client(url, token="s3cret-token")
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.seen and all(h.get("Authorization") == "Bearer s3cret-token" for h in _Recorder.seen)
    assert "s3cret-token" not in str(failed.value)
