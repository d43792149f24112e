"""Probes of the `recollect` command: bad dialogue files, bad options, unusable data directories.

Most run `recollect.cli.main` in this process (a traceback is an exception escaping it); the few that need
the real entry point or file permissions run `python -m recollect.cli` in a subprocess. Every model call goes
to the scripted endpoint the runner started (RECOLLECT_LLM_BASE_URL), never to a real model.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.probes.common import Tally, dialogue, fingerprint, locomo_sample, one_error_line

SURFACE = "cli"
ROOT = Path(__file__).resolve().parents[2]


def cli(*argv: str) -> tuple[int, str, str]:
    """`recollect ARGV` in this process: (exit status, stdout, stderr); an escaping exception propagates."""
    from recollect.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def refused(*argv: str, says: str = "", code: int = 2, untouched: Path | None = None) -> Callable[[], str | None]:
    """A probe: the command fails with one `error:` line holding `says`, exit `code`, and changes nothing."""
    def probe() -> str | None:
        before = fingerprint(untouched) if untouched else None
        got, out, err = cli(*argv)
        if got != code or out or not one_error_line(err) or says not in err:
            return f"exit {got}, stdout {out[:120]!r}, stderr {err[:300]!r}"
        if untouched and fingerprint(untouched) != before:
            return "it changed the data directory"
        return None
    return probe


def accepted(*argv: str, shows: str = "", check: Callable[[str], str | None] | None = None) -> Callable[[], str | None]:
    """A probe: the command succeeds (exit 0) and prints `shows`; `check` judges its standard output."""
    def probe() -> str | None:
        got, out, err = cli(*argv)
        if got != 0 or shows not in out:
            return f"exit {got}, stdout {out[:200]!r}, stderr {err[-300:]!r}"
        return check(out) if check else None
    return probe


def _write(folder: Path, name: str, content: str | bytes | Any) -> str:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def _with_turn(**fields: Any) -> dict[str, Any]:
    data = dialogue()
    data["sessions"][0]["turns"][0] = {"speaker": "Ines", "text": "hello", **fields}
    return data


def bad_files(folder: Path) -> dict[str, tuple[str, str]]:
    """name -> (file, text the error must hold): dialogue files every ingest must refuse."""
    good = json.dumps(dialogue())
    two = [dialogue("first"), dialogue("second")]
    cases: dict[str, Any] = {
        "empty file": ("empty.json", "", "invalid JSON"),
        "truncated JSON": ("cut.json", good[: len(good) // 2], "invalid JSON at line"),
        "binary bytes": ("binary.json", bytes(range(256)) * 4, "not UTF-8"),
        "UTF-16 with BOM": ("utf16.json", good.encode("utf-16"), "not UTF-8"),
        "Latin-1 text": ("latin1.json", good.replace("grey", "gr\u00e9y").encode("latin-1"), "not UTF-8"),
        "UTF-8 BOM": ("bom.json", "\ufeff" + good, "invalid JSON"),
        "top level a number": ("number.json", "42", "top level must be"),
        "empty list": ("list.json", "[]", "holds no conversations"),
        "no sessions": ("nosessions.json", {"id": "c"}, "sessions"),
        "sessions not a list": ("sessions.json", {"id": "c", "sessions": {"a": 1}}, "sessions"),
        "turn not an object": ("turn.json", {"sessions": [{"turns": ["hi"]}]}, "turns[0]: turn must be an object"),
        "turn without speaker": ("speaker.json", _with_turn(speaker=""), "turns[0].speaker"),
        "turn without text": ("text.json", _with_turn(text=""), "turns[0].text"),
        "speaker not listed": ("listed.json", _with_turn(speaker="Zed"), "is not in 'speakers'"),
        "duplicate turn ids": ("dup.json", {"sessions": [{"turns": [{"speaker": "A", "text": "a", "id": "x"},
                                                                    {"speaker": "A", "text": "b", "id": "x"}]}]},
                               "duplicate turn id"),
        "image urls not strings": ("urls.json", _with_turn(img_urls=[1]), "img_urls"),
        "date not a string": ("date.json", {"sessions": [{"date_time": 5, "turns": [{"speaker": "A", "text": "a"}]}]},
                              "date_time: must be a string"),
        "two conversations, none chosen": ("two.json", two, "holds 2 conversations"),
        "LoCoMo without conversation": ("locomo1.json", [{"sample_id": "s", "conversation": {}}], "speaker_a"),
        "LoCoMo without speaker_b": ("locomo2.json", [{**locomo_sample(), "conversation": {
            **locomo_sample()["conversation"], "speaker_b": ""}}], "speaker_b"),
        "lone surrogate in text": ("sur1.json", good.replace("grey", "gr\\ud800ey"), "holds a lone UTF-16 surrogate"),
        "lone surrogate in speaker": ("sur2.json", good.replace('"Tomas"', '"Tom\\udc00as"', 1), "speakers[1]: holds"),
        "lone surrogate in a key": ("sur3.json", good.replace('"id"', '"i\\udfffd"', 1), "a key holds a lone"),
        "lone surrogate in LoCoMo": ("sur4.json", json.dumps([locomo_sample()]).replace("grey", "\\ud83d"),
                                     "conversation.session_1[0].text: holds"),
        "nested 100,000 deep": ("deep1.json", "[" * 100_000 + "]" * 100_000, "nested more than 64"),
        "objects nested 50,000 deep": ("deep2.json", '{"a":' * 50_000 + "1" + "}" * 50_000, "nested more than 64"),
        "turn text nested 60,000 deep": ("deep3.json", good.replace('"He sleeps there all afternoon."',
                                                                    "[" * 60_000 + "]" * 60_000), "nested more than 64"),
        "an extra field 65 deep": ("deep4.json", {**dialogue(), "notes": json.loads("[" * 64 + "]" * 64)},
                                   "nested more than 64"),
    }
    return {name: (_write(folder, file, content), says) for name, (file, content, says) in cases.items()}


def good_files(folder: Path) -> dict[str, str]:
    """name -> file: unusual dialogues that are fine and must be ingested."""
    emoji = json.dumps(dialogue("emoji")).replace("grey", "\\ud83d\\ude00 grey")  # a complete surrogate pair
    brackets = dialogue("brackets")
    brackets["sessions"][0]["turns"][1]["text"] = "[{" * 1000 + " ok"
    big = dialogue("big")
    big["sessions"][0]["turns"][1]["text"] = "pottery " * 130_000  # about 1 MB in one turn
    return {"a complete surrogate pair": _write(folder, "emoji.json", emoji),
            "brackets inside text": _write(folder, "brackets.json", brackets),
            "a 1 MB turn": _write(folder, "big.json", big),
            "LoCoMo sample": _write(folder, "locomo.json", [locomo_sample()])}


def _unprivileged(data: Path, *argv: str) -> subprocess.CompletedProcess[str] | None:
    """`python -m recollect.cli` with file permissions enforced (as root: with the override capabilities
    dropped); None when they cannot be (root without setpriv)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            return None
        drop = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}"]
    return subprocess.run([*prefix, sys.executable, "-m", "recollect.cli", "--data-dir", str(data), *argv],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300,
                          cwd=ROOT)


def _read_only_probes(tally: Tally, data: Path) -> None:
    for p in [data, *data.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        def listed() -> str | None:
            done = _unprivileged(data, "namespaces")
            if done is None:
                return None  # permissions cannot be enforced here: nothing to learn
            return None if done.returncode == 0 and "probe: conversation=" in done.stdout else \
                f"exit {done.returncode}: {done.stderr[-300:]!r}"

        def refused_write() -> str | None:
            done = _unprivileged(data, "ingest", "sample", "-n", "more", "--methods", "memr3")
            if done is None:
                return None
            return None if done.returncode == 2 and one_error_line(done.stderr) and "not writable" in done.stderr \
                else f"exit {done.returncode}: {done.stderr[-300:]!r}"

        tally.check(SURFACE, "namespaces on a read-only data dir lists it", listed)
        tally.check(SURFACE, "ingest into a read-only data dir is refused", refused_write)
    finally:
        for p in [data, *data.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)


def run(tally: Tally, work: Path) -> None:
    files = work / "files"
    files.mkdir(parents=True)
    data = work / "cli-data"
    good = _write(files, "good.json", dialogue())
    tally.check(SURFACE, "ingest a good dialogue", accepted("--data-dir", str(data), "ingest", good, "-n", "probe",
                                                            "--methods", "memr3", shows="ines-tomas"))
    for name, (path, says) in bad_files(files).items():
        tally.check(SURFACE, f"ingest: {name}", refused("--data-dir", str(data), "ingest", path, "-n", "bad",
                                                        "--methods", "memr3", says=says, untouched=data))
    fresh = work / "never-made"
    tally.check(SURFACE, "ingest a bad file into a fresh dir makes no dir", lambda: refused(
        "--data-dir", str(fresh), "ingest", bad_files(files)["lone surrogate in text"][0], "-n", "x")()
        or ("the data directory was made" if fresh.exists() else None))
    for name, path in good_files(files).items():
        tally.check(SURFACE, f"ingest: {name}", accepted("--data-dir", str(data), "ingest", path, "-n",
                                                         f"ok-{len(name)}-{name[:4].strip()}", "--methods", "memr3"))
    d = ("--data-dir", str(data))
    refusals: dict[str, tuple[tuple[str, ...], str]] = {
        "missing file": (("ingest", str(files / "nope.json"), "-n", "x"), "dialogue file not found"),
        "a directory as the file": (("ingest", str(files), "-n", "x"), "is a directory"),
        "unknown conversation id": (("ingest", str(files / "two.json"), "-n", "x", "--conversation", "third"),
                                    "no conversation with id"),
        "empty namespace": (("ingest", good, "-n", ""), "invalid namespace"),
        "namespace with a leading space": (("ingest", good, "-n", " lead"), "invalid namespace"),
        "namespace with a newline": (("ask", "q?", "-n", "a\nb"), "invalid namespace"),
        "namespace of 201 characters": (("forget", "x" * 201), "invalid namespace"),
        "--methods ','": (("ingest", good, "-n", "x", "--methods", ","), "names no method"),
        "unknown method": (("ingest", good, "-n", "x", "--methods", "memr4"), "unknown method"),
        "unknown setting": (("ask", "q?", "-n", "probe", "--set", "nope=1"), "unknown setting"),
        "another method's setting": (("ask", "q?", "-n", "probe", "-m", "rag", "--set", "hymem_light_k=3"),
                                     "not a setting of rag"),
        "ingest with a setting of no chosen method": (("ingest", good, "-n", "probe", "--methods", "memr3", "--set",
                                                       "mg_depth=2"), "not a setting of memr3"),
        "a setting given twice": (("ask", "q?", "-n", "probe", "--set", "memr3_top_k=3", "--set", "memr3_top_k=4"),
                                  "given twice"),
        "a setting of the wrong type": (("ask", "q?", "-n", "probe", "--set", "memr3_max_iterations=abc"),
                                        "memr3_max_iterations"),
        "a setting out of range": (("ask", "q?", "-n", "probe", "--set", "memr3_max_iterations=-3"), "at least"),
        "--set without '='": (("ask", "q?", "-n", "probe", "--set", "memr3_top_k"), "key=value"),
        "empty question": (("ask", "  ", "-n", "probe"), "the question is empty"),
        "unknown namespace": (("ask", "q?", "-n", "nobody"), "never been ingested"),
        "memory not built": (("ask", "q?", "-n", "probe", "-m", "hymem"), "has no hymem memory"),
        "empty --thread": (("ask", "q?", "-n", "probe", "--thread", ""), "--thread"),
        "--gold-evidence ','": (("ask", "q?", "-n", "probe", "--gold-evidence", ","), "--gold-evidence"),
        "unknown thread": (("history", "no-such-thread"), "no thread"),
        "serve --port -1": (("serve", "--port", "-1"), "a port is 0-65535"),
        "serve --port 70000": (("serve", "--port", "70000"), "a port is 0-65535"),
        "serve --host ''": (("serve", "--host", ""), "--host is empty"),
        "serve on 0.0.0.0 without auth": (("serve", "--host", "0.0.0.0"), "--auth-file"),
        "serve with a missing auth file": (("serve", "--auth-file", str(files / "none.json")), "cannot read"),
        "serve with a short key": (("serve", "--auth-file", _write(files, "auth.json", {"short": {
            "user": "u", "namespaces": ["n"]}})), "at least 16 characters"),
    }
    for name, (argv, says) in refusals.items():
        tally.check(SURFACE, name, refused(*d, *argv, says=says, untouched=data))
    tally.check(SURFACE, "score a missing file", refused(*d, "score", str(files / "none.jsonl"),
                                                               says="none.jsonl: file not found"))
    blocker = work / "a-file"
    blocker.write_text("not a directory")
    tally.check(SURFACE, "--data-dir ''", refused("--data-dir", "", "namespaces", says="--data-dir is empty"))
    tally.check(SURFACE, "--data-dir is a file", refused("--data-dir", str(blocker), "namespaces", says="is a file"))
    tally.check(SURFACE, "--data-dir under a file", refused("--data-dir", str(blocker / "d"), "ask", "q?", "-n", "x",
                                                           says="which is a file"))
    sample = locomo_sample()
    sample["qa"] = [{"question": "What is the cat called?", "answer": "Pesto", "evidence": ["D1:1"], "category": 1}]
    locomo = _write(files, "eval.json", [sample])
    tally.check(SURFACE, "eval --categories ','", refused(
        *d, "eval", "--data", locomo, "--methods", "rag", "--categories", ",", "--limit", "1", "--judge", "none",
        "--out", str(work / "eval-out"), "--quiet", says="--categories"))
    tally.check(SURFACE, "forget an unknown namespace", accepted(*d, "forget", "nobody", shows="forgot"))
    tally.check(SURFACE, "namespaces in a fresh dir makes none", lambda: accepted(
        "--data-dir", str(work / "fresh-list"), "namespaces")() or (
        "it made the data directory" if (work / "fresh-list").exists() else None))
    tally.check(SURFACE, "settings", accepted("settings", shows="memr3_max_iterations"))
    tally.check(SURFACE, "ask the probe namespace", accepted(*d, "ask", "Where does Tomas work?", "-n", "probe",
                                                             "-m", "rag", shows="answer:"))
    tally.check(SURFACE, "ask --json --trace prints one JSON document", accepted(
        *d, "ask", "What is the cat called?", "-n", "probe", "-m", "rag", "--json", "--trace",
        check=lambda out: None if isinstance(json.loads(out), dict) else "not a JSON object"))

    def entry_point() -> str | None:
        done = subprocess.run([sys.executable, "-m", "recollect.cli", "--data-dir", str(data), "ingest",
                               bad_files(files)["nested 100,000 deep"][0], "-n", "x"], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300, cwd=ROOT)
        return None if done.returncode == 2 and one_error_line(done.stderr) else \
            f"exit {done.returncode}: {done.stderr[-300:]!r}"

    tally.check(SURFACE, "the installed entry point on a deep file", entry_point)
    _read_only_probes(tally, data)
