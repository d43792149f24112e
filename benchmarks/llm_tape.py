"""Record every chat request and reply of a recollect command, or replay a recording with no model at all.

Why: a refactor that claims "behaviour unchanged" must send the model the same requests. Recording a run
on the real model and replaying the refactored code against the recording proves it request by request:
every request of the replay must be byte-for-byte one the recording holds (same prompt, schema, sampling
settings), and then every reply, hence every answer, is the same. The replay needs no model, so it takes
minutes where the recorded run took hours.

    python benchmarks/llm_tape.py record runs/tape.jsonl -- --data-dir D eval --data F ...   # real model
    PYTHONPATH=../old python benchmarks/llm_tape.py replay --import-root app T -- ...  # an older checkout's code
    python benchmarks/llm_tape.py replay runs/tape.jsonl -- --data-dir D2 eval --data F ...  # no model
    python benchmarks/llm_tape.py compare runs/before runs/after    # the two runs' rows, field by field

Everything after `--` is the `recollect` command line. `record` puts a recording proxy between recollect
and the chat endpoint it would have used (the embedded llama.cpp server or RECOLLECT_LLM_BASE_URL);
`replay` answers from the tape and counts misses; each miss is written with its request to
`<tape>.misses.jsonl` and fails the request (HTTP 599), so a changed prompt shows up as an error row.
The exit status of `replay` is 1 when any request missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# One key function for this tool and the eval's tapes (recollect.eval.tape), so either replays the other's.
from recollect.eval.tape import request_key


class Tape:
    def __init__(self, path: Path, mode: str, upstream: str = "") -> None:
        self.path, self.mode, self.upstream = path, mode, upstream.rstrip("/")
        self.lock = threading.Lock()
        self.replies: dict[str, dict[str, Any]] = {}
        self.hits = self.misses = self.recorded = 0
        if mode == "replay":
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                self.replies.setdefault(row["key"], row)
        self.misses_path = path.with_suffix(".misses.jsonl")
        if mode == "replay" and self.misses_path.exists():
            self.misses_path.unlink()

    def answer(self, path: str, body: bytes) -> tuple[int, str, bytes]:
        key = request_key(path, body)
        if self.mode == "replay":
            row = self.replies.get(key)
            with self.lock:
                if row is None:
                    self.misses += 1
                    with self.misses_path.open("a", encoding="utf-8") as f:
                        f.write(json.dumps({"key": key, "path": path, "request": body.decode("utf-8", "replace")})
                                + "\n")
                    return 599, "text/plain", b"llm_tape: this request is not on the tape"
                self.hits += 1
            return row["status"], row["content_type"], row["reply"].encode("utf-8")
        req = urllib.request.Request(self.upstream + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer tape"})
        try:
            with urllib.request.urlopen(req, timeout=900) as r:
                status, ctype, reply = r.status, r.headers.get("Content-Type", "application/json"), r.read()
        except urllib.error.HTTPError as e:
            status, ctype, reply = e.code, e.headers.get("Content-Type", "application/json"), e.read()
        with self.lock:
            self.recorded += 1
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"key": key, "path": path, "status": status, "content_type": ctype,
                                    "request": body.decode("utf-8", "replace"),
                                    "reply": reply.decode("utf-8", "replace")}, ensure_ascii=False) + "\n")
        return status, ctype, reply


def start_proxy(tape: Tape) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("/v1", 1)[-1]  # the tape does not depend on the upstream's prefix
            status, ctype, reply = tape.answer(path, body)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def do_GET(self) -> None:  # noqa: N802 - health checks of the client (models list)
            reply = b'{"object": "list", "data": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _import_any(*names: str) -> Any:
    import importlib

    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"none of {names} can be imported")


# What "the same answers" means for two eval runs of the same questions: every row's answer, what it
# cites, what the model was shown, its scores and its cost in calls and tokens.
COMPARED = ("prediction", "supports", "retrieved_turn_ids", "evidence_recall", "locomo_f1", "n_llm_calls",
            "prompt_tokens", "completion_tokens", "draft_answer", "error")


def compare(before: Path, after: Path) -> int:
    """Print, per method, how many rows of `after` equal `before` on COMPARED; 1 when any differs."""
    def rows(run: Path) -> dict[tuple[str, str], dict[str, Any]]:
        out = {}
        for line in (run / "per_question.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            out[(row["method"], row["question_id"])] = row
        return out

    a, b = rows(before), rows(after)
    differ = 0
    for method in sorted({m for m, _ in a}):
        keys = sorted(k for k in a if k[0] == method)
        same = [k for k in keys if k in b and all(a[k].get(f) == b[k].get(f) for f in COMPARED)]
        differ += len(keys) - len(same)
        print(f"{method:14s} {len(same)}/{len(keys)} rows equal")
        for k in keys:
            if k not in same:
                fields = [f for f in COMPARED if k not in b or a[k].get(f) != b[k].get(f)]
                print(f"  {k[1]}: differs in {', '.join(fields)}")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        return compare(Path(argv[1]), Path(argv[2]))
    cut = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["record", "replay"])
    p.add_argument("tape", type=Path)
    # Which code answers: this checkout's `recollect`, or a checkout from before the one import root
    # (`app`, run with PYTHONPATH=<that checkout>). Never a fallback from one to the other: an editable
    # install of recollect is importable from anywhere, and a replay of the old code must not run it.
    p.add_argument("--import-root", choices=["recollect", "app"], default="recollect")
    args = p.parse_args(argv[:cut])
    command = argv[cut + 1:]

    # Before and after the move to one import root, the model factory lives in different modules.
    root = args.import_root
    models = _import_any(f"{root}.llm.models")
    cli = _import_any(f"{root}.cli")
    original = models._openai
    holder: dict[str, Tape] = {}

    def through_tape(base_url: str, api_key: str, model: str, json_whitespace: str = "") -> Any:
        if args.mode == "record":
            upstream = base_url or "https://api.openai.com/v1"
        elif base_url.startswith("http://127.0.0.1"):
            upstream = base_url  # never contacted
        else:
            upstream = base_url
        tape = holder.setdefault("tape", Tape(args.tape, args.mode, upstream))
        proxy = start_proxy(tape)
        return original(f"http://127.0.0.1:{proxy.server_address[1]}/v1", api_key, model, json_whitespace)

    models._openai = through_tape
    if args.mode == "replay":
        # No model server: the replay answers every request. The client still asks for the embedded
        # model's alias and whitespace setting, which the settings decide, so the requests match.
        local = _import_any(f"{root}.llm.local_runtime")

        class NoServer(local.LocalServer):
            def start(self, timeout_s: float = 180.0) -> Any:
                self.port = 9  # discard: never contacted, the tape proxy stands in for it
                return self

            def stop(self) -> None:
                pass

        models_local = models.__dict__
        models_local["LocalServer"] = NoServer
        local.LocalServer = NoServer
    args.tape.parent.mkdir(parents=True, exist_ok=True)
    code = cli.main(command)
    tape = holder.get("tape")
    if tape is not None:
        print(f"llm_tape {args.mode}: {tape.recorded} recorded, {tape.hits} replayed, {tape.misses} missed"
              + (f" (requests in {tape.misses_path})" if tape.misses else ""), file=sys.stderr)
        if args.mode == "replay" and tape.misses:
            return 1
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
