"""The prebuilt xllamacpp wheel (AVX2) against xllamacpp compiled here for AVX-512, one run, same machine.

    python benchmarks/runtime_speed.py [--native-dir ~/.cache/recollect/xllamacpp-avx512] [--repeats 2]
                                       [--prompt-tokens 1500] [--decode-tokens 256] [--long-prompt-tokens 4000]
                                       [--pause-script PATH --resume-script PATH]

The venv's xllamacpp (the prebuilt wheel) is never touched: the compiled one is installed with
`pip install --target` into --native-dir (built first with app/llm/native_build.py into the wheel cache
when that is empty), and its server process gets that folder first on its PYTHONPATH. Both servers run
the embedded 1.5B model with the project's settings and are started (and warmed up) before any timing.
Then, per round and runtime (the order alternates between rounds), one timing phase, one request at a
time, with the other server idle:

- prefill: a fresh prompt of ~--prompt-tokens tokens (a new nonce first, so nothing of it is cached),
  one generated token; tokens/s from the server's own timings and from the wall clock;
- decode: --decode-tokens generated tokens (`ignore_eos`), tokens/s from the server's timings;
- long call: a fresh ~--long-prompt-tokens prompt and 100 generated tokens, end to end (wall seconds).

Best of --repeats per runtime. Then, untimed, the same greedy prompts to both (one of them schema-
constrained JSON): identical replies, or how many characters agree. Writes
benchmarks/reports/runtime_speed.{json,md}.

Timings need the 2 cores. Right before each timing phase a pause script stops a background job (default:
/work/decisive_run/pause.sh when it exists) and right after it, in a finally block and at the latest after
--max-pause-s, the resume script continues it. The scripts are fed to bash on stdin: `bash SCRIPT` would
match the script's own process pattern and stop itself (for the same reason, keep such paths off this
script's command line). Jobs no script stops (other sessions) are held off by raising our servers'
priority during the phase (--nice, threads and autogroup; needs root), and every measurement records
the share of the cores other processes used while it ran and is repeated when that is over
--max-foreign-busy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recollect.llm import local_runtime as lr  # noqa: E402 - after the path fix above
from recollect.llm import native_build as nb  # noqa: E402

RUNTIMES = ("prebuilt", "native")
SHOWN_FLAGS = ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd",
               "avx512_vnni", "avx512vbmi", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")
AGREEMENT_PROMPTS: list[dict[str, Any]] = [
    {"content": "List three uses of a paperclip, one per line."},
    {"content": "What is 17 * 23? Answer with the number only."},
    {"content": "Ana: I'm flying to Porto on 3 May 2023.\nBen: Nice! My sister's wedding is on 20 May.\n"
                "Ana: And we have the team dinner next Friday, 12 May.\n\n"
                "List every plan or event mentioned above with its date, one per line."},
    {"content": "Extract the person and the city: 'Maria moved to Lisbon in May 2022 after her new job.'",
     "response_format": {"type": "json_object", "schema": {
         "type": "object", "properties": {"person": {"type": "string"}, "city": {"type": "string"}},
         "required": ["person", "city"]}}},
]


# --------------------------------------------------------------------------------------------- runtimes


def ensure_native(native_dir: Path) -> dict[str, Any]:
    """xllamacpp compiled for this CPU, installed into `native_dir` (never into the venv)."""
    args = nb.xllamacpp_cmake_args("avx512", nb.cpu_flags())
    assert args is not None
    wdir = nb.wheel_dir(args)
    wheel = nb.cached_wheel(wdir) or nb.build_wheel(args)
    stamp = native_dir / "RECOLLECT_WHEEL"
    if not (native_dir / "xllamacpp").is_dir() or not stamp.is_file() or stamp.read_text().strip() != wheel.name:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade", "--target",
                        str(native_dir), str(wheel)], check=True)
        stamp.write_text(wheel.name + "\n")
    seconds = wdir / "BUILD_SECONDS"
    return {"dir": str(native_dir), "wheel": str(wheel), "cmake_args": args,
            "build_seconds": int(seconds.read_text()) if seconds.is_file() else None}


def env_for(runtime: str, native_dir: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(native_dir), str(ROOT)])} if runtime == "native" else {}


def system_info(env: dict[str, str]) -> dict[str, str]:
    code = "import xllamacpp; print(xllamacpp.__file__); print(xllamacpp.get_system_info())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return {"module": out[0], "system_info": out[1].strip()}


def loaded_library(pid: int) -> str:
    """The xllamacpp library the server process mapped: proof of which build served."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        if line.endswith("xllamacpp.abi3.so"):
            return line.split()[-1]
    return "?"


# --------------------------------------------------------------------------------------------- requests


def chat(srv: lr.LocalServer, content: str, max_tokens: int, **extra: Any) -> tuple[dict[str, Any], float]:
    body = {"model": srv.spec.alias, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0, **extra}
    req = urllib.request.Request(f"{srv.base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=900) as r:
        reply = json.load(r)
    return reply, time.monotonic() - t


def count_tokens(srv: lr.LocalServer, text: str) -> int:
    req = urllib.request.Request(srv.base_url.removesuffix("/v1") + "/tokenize",
                                 data=json.dumps({"content": text}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return len(json.load(r)["tokens"])


def note(i: int) -> str:
    return f"Note {i}: the blue kettle stood on shelf {i % 7} next to {i * 3} cups."


def filler(srv: lr.LocalServer, tokens: int) -> str:
    per_note = count_tokens(srv, " ".join(note(i) for i in range(20))) / 20
    return " ".join(note(i) for i in range(max(1, round(tokens / per_note))))


def prefill(srv: lr.LocalServer, text: str) -> dict[str, float]:
    # A new nonce first: nothing of this prompt is in any cache, so all of it is prefilled.
    reply, wall = chat(srv, f"[{uuid.uuid4().hex}] {text}\nReply with one word.", 1)
    t = reply.get("timings") or {}
    return {"prompt_tokens": reply["usage"]["prompt_tokens"], "prompt_n": t.get("prompt_n", 0),
            "tps": round(t.get("prompt_per_second", 0.0), 2),
            "wall_tps": round(reply["usage"]["prompt_tokens"] / wall, 2), "wall_s": round(wall, 2)}


def decode(srv: lr.LocalServer, n: int) -> dict[str, float]:
    reply, wall = chat(srv, f"[{uuid.uuid4().hex}] Count from 1 to 2000, numbers separated by commas.", n,
                       ignore_eos=True)
    t = reply.get("timings") or {}
    n_out = reply["usage"]["completion_tokens"]
    return {"completion_tokens": n_out, "tps": round(t.get("predicted_per_second", 0.0), 2),
            "wall_tps": round(n_out / max(wall - t.get("prompt_ms", 0.0) / 1000, 1e-6), 2), "wall_s": round(wall, 2)}


def long_call(srv: lr.LocalServer, text: str) -> dict[str, float]:
    reply, wall = chat(srv, f"[{uuid.uuid4().hex}] {text}\nWhich shelf held the kettle most often? Explain.", 100,
                       ignore_eos=True)
    return {"prompt_tokens": reply["usage"]["prompt_tokens"],
            "completion_tokens": reply["usage"]["completion_tokens"], "wall_s": round(wall, 2)}


# --------------------------------------------------------------------------------------------- pauses


def _proc_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime of all its threads, in clock ticks


def cpu_sample(pids: list[int]) -> tuple[int, int, int]:
    """(busy ticks of all cores, all ticks, ticks of our server processes), from /proc."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    total = sum(values)
    return total - values[3] - values[4], total, sum(_proc_ticks(p) for p in pids)  # minus idle, iowait


def foreign_share(before: tuple[int, int, int], after: tuple[int, int, int]) -> float:
    """The share of all cores that processes other than our servers used between two samples."""
    busy, total, ours = (y - x for x, y in zip(before, after, strict=True))
    return round(max(busy - ours, 0) / max(total, 1), 3)


def renice(pids: list[int], value: int) -> bool:
    """Set the nice value of every thread of `pids` and of their autogroups; False when not allowed.

    Per thread: a process-wide call reaches only the main thread. Autogroup: with
    kernel.sched_autogroup_enabled every session is scheduled as one group against the others, so a
    thread's nice only counts inside its session; our servers run in sessions of their own (LocalServer
    starts them with start_new_session), so their group's nice is theirs alone. Raising priority needs root.
    """
    try:
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                os.setpriority(os.PRIO_PROCESS, int(task.name), value)
            group = Path(f"/proc/{pid}/autogroup")
            if group.is_file():
                group.write_text(f"{value}\n")
    except OSError:
        return False
    return True


def _script(path: str) -> None:
    if path:
        # On stdin: `bash SCRIPT` would carry the script's path in its command line, match the script's own
        # process pattern and stop itself.
        with open(path) as f:
            subprocess.run(["bash"], stdin=f, check=False, timeout=60, capture_output=True)


@contextlib.contextmanager
def cores_to_ourselves(a: argparse.Namespace, log: list[dict[str, Any]], pids: list[int]) -> Iterator[None]:
    """One timing phase: the background job paused (resumed whatever happens, at the latest after
    --max-pause-s: a timer resumes it then and marks the phase `overran`), and our servers at --nice.

    The priority is for jobs the pause script does not stop (other sessions' niced runs): two llama.cpp
    servers on 2 cores slow each other by an order of magnitude. Each measurement also records the share
    of the cores other processes used while it ran, and is repeated when that share is too high.
    """
    entry: dict[str, Any] = {"overran": False}
    t = time.monotonic()

    def overrun() -> None:
        entry["overran"] = True
        _script(a.resume_script)

    _script(a.pause_script)
    timer = threading.Timer(a.max_pause_s, overrun)
    timer.start()
    try:
        entry["reniced"] = renice(pids, a.nice)
        yield
    finally:
        timer.cancel()
        renice(pids, 0)
        _script(a.resume_script)
        entry["paused_s"] = round(time.monotonic() - t, 1)
        log.append(entry)
        print(f"  (paused {entry['paused_s']} s; overran: {entry['overran']})", flush=True)


def measured(fn: Callable[[], dict[str, float]], pids: list[int], a: argparse.Namespace) -> dict[str, float]:
    """`fn()` with the share of the cores other processes used meanwhile; again (--tries) while too high."""
    for attempt in range(1, a.tries + 1):
        before = cpu_sample(pids)
        row = fn()
        row.update(foreign=foreign_share(before, cpu_sample(pids)), attempts=attempt)
        if row["foreign"] <= a.max_foreign_busy:
            break
        print(f"    other processes used {row['foreign']:.0%} of the cores meanwhile: measuring again", flush=True)
    return row


# --------------------------------------------------------------------------------------------- run


def best(rows: list[dict[str, float]], key: str, fn: Any = max) -> float:
    return fn(r[key] for r in rows)


def run(a: argparse.Namespace) -> dict[str, Any]:
    native_dir = Path(a.native_dir).expanduser()
    native = ensure_native(native_dir)
    infos = {rt: system_info(env_for(rt, native_dir)) for rt in RUNTIMES}
    raw: dict[str, dict[str, list[dict[str, float]]]] = {rt: {"prefill": [], "decode": [], "long": []}
                                                         for rt in RUNTIMES}
    pauses: list[dict[str, Any]] = []
    replies: dict[str, list[str]] = {}
    servers = {rt: lr.LocalServer(runtime="xllamacpp", extra_env=env_for(rt, native_dir)) for rt in RUNTIMES}
    try:
        for rt, srv in servers.items():
            srv.start()
            assert srv.proc is not None
            infos[rt]["served_by"] = loaded_library(srv.proc.pid)
            chat(srv, "Say hi.", 4)  # warm-up: first-call allocations (and thread creation) are not measured
        pids = [srv.proc.pid for srv in servers.values() if srv.proc is not None]
        text = filler(servers["prebuilt"], a.prompt_tokens)
        long_text = filler(servers["prebuilt"], a.long_prompt_tokens)
        for rep in range(a.repeats):
            for rt in RUNTIMES if rep % 2 == 0 else RUNTIMES[::-1]:  # alternate: no runtime always goes first
                srv = servers[rt]
                print(f"timing round {rep + 1}/{a.repeats}: {rt}", flush=True)
                with cores_to_ourselves(a, pauses, pids):
                    raw[rt]["prefill"].append(measured(lambda s=srv: prefill(s, text), pids, a))
                    raw[rt]["decode"].append(measured(lambda s=srv: decode(s, a.decode_tokens), pids, a))
                    raw[rt]["long"].append(measured(lambda s=srv: long_call(s, long_text), pids, a))
                time.sleep(a.gap_s)  # the background job's turn
        print("greedy agreement (untimed)", flush=True)
        for rt, srv in servers.items():
            replies[rt] = []
            for p in AGREEMENT_PROMPTS:
                reply, _ = chat(srv, p["content"], 100, **{k: v for k, v in p.items() if k != "content"})
                replies[rt].append(reply["choices"][0]["message"]["content"])
    finally:
        for srv in servers.values():
            srv.stop()
    return build_report(a, native, infos, raw, pauses, replies)


def build_report(a: argparse.Namespace, native: dict[str, Any], infos: dict[str, Any], raw: dict[str, Any],
                 pauses: list[dict[str, Any]], replies: dict[str, list[str]]) -> dict[str, Any]:
    limits = {rt: {"prefill_tps": best(raw[rt]["prefill"], "tps"),
                   "prefill_wall_tps": best(raw[rt]["prefill"], "wall_tps"),
                   "decode_tps": best(raw[rt]["decode"], "tps"),
                   "long_call_s": best(raw[rt]["long"], "wall_s", min),
                   "prompt_tokens": raw[rt]["prefill"][0]["prompt_tokens"],
                   "long_prompt_tokens": raw[rt]["long"][0]["prompt_tokens"]} for rt in RUNTIMES}
    p, n = limits["prebuilt"], limits["native"]
    speedup = {"prefill": round(n["prefill_tps"] / p["prefill_tps"], 2),
               "decode": round(n["decode_tps"] / p["decode_tps"], 2),
               "long_call": round(p["long_call_s"] / n["long_call_s"], 2)}
    pairs = list(zip(replies["prebuilt"], replies["native"], strict=True))
    agreement = {"prompts": len(pairs), "identical": sum(x == y for x, y in pairs),
                 "chars_before_first_difference": [len(os.path.commonprefix([x, y])) for x, y in pairs],
                 "reply_chars_prebuilt": [len(x) for x, _ in pairs], "replies": replies}
    flags = nb.cpu_flags()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {
        "command": "python benchmarks/runtime_speed.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "flags": [f for f in SHOWN_FLAGS if f in flags]},
        "runtimes": {"prebuilt": {"xllamacpp": nb.XLLAMACPP_VERSION, **infos["prebuilt"]},
                     "native": {"xllamacpp": nb.XLLAMACPP_VERSION, **infos["native"], **native}},
        "settings": {"repeats": a.repeats, "decode_tokens": a.decode_tokens, "threads": lr.get_settings().local_threads,
                     "nice": a.nice, "max_foreign_busy": a.max_foreign_busy, "tries": a.tries, "pauses": pauses},
        "limits": limits, "speedup_native_over_prebuilt": speedup, "raw": raw, "greedy_agreement": agreement,
    }


def markdown(rep: dict[str, Any]) -> str:
    lim, sp, ag = rep["limits"], rep["speedup_native_over_prebuilt"], rep["greedy_agreement"]
    nat = rep["runtimes"]["native"]
    foreign = max(r.get("foreign", 0.0) for rt in RUNTIMES for rows in rep["raw"][rt].values() for r in rows)
    build = f"{nat['build_seconds'] / 60:.1f} min" if nat.get("build_seconds") else "not recorded"
    lines = [
        "# xllamacpp: the prebuilt wheel (AVX2) against a build for this CPU (AVX-512), one run", "",
        f"Made by `{rep['command']}` on {rep['date']}, {rep['machine']['cores']} cores ({rep['machine']['cpu']}), "
        f"{rep['settings']['threads']} threads, best of {rep['settings']['repeats']}.",
        f"CPU flags: {', '.join(rep['machine']['flags'])}.", "",
        f"- **prebuilt**: xllamacpp {rep['runtimes']['prebuilt']['xllamacpp']} from PyPI: "
        f"`{rep['runtimes']['prebuilt']['system_info']}`",
        f"- **native**: the same version compiled from the sdist with `CMAKE_ARGS=\"{nat['cmake_args']}\"` "
        f"(build: {build} on 2 cores): `{nat['system_info']}`", "",
        "| runtime | prefill tok/s (server) | prefill tok/s (wall) | decode tok/s | "
        f"long call s (~{lim['prebuilt']['long_prompt_tokens']} prompt + 100 out) |", "|---|---|---|---|---|",
    ]
    for rt in RUNTIMES:
        v = lim[rt]
        lines.append(f"| {rt} | {v['prefill_tps']} | {v['prefill_wall_tps']} | {v['decode_tps']} | {v['long_call_s']} |")
    lines += [f"| native ÷ prebuilt | {sp['prefill']}× | | {sp['decode']}× | {sp['long_call']}× faster |", "",
              f"Prefill prompt: {lim['prebuilt']['prompt_tokens']} tokens, fresh each time; decode: "
              f"{rep['settings']['decode_tokens']} tokens. Timing phases (s): "
              + ", ".join(f"{p['paused_s']}" for p in rep["settings"]["pauses"])
              + f"; our servers' priority raised during them: {all(p.get('reniced') for p in rep['settings']['pauses'])}"
              + ("; a phase ran past the pause limit (the background job was resumed during it)"
                 if any(p["overran"] for p in rep["settings"]["pauses"]) else "")
              + f". Other processes' share of the cores during a kept measurement: at most {foreign:.0%} "
              "(a measurement is repeated when it is above "
              f"{rep['settings']['max_foreign_busy']:.0%}, {rep['settings']['tries']} tries at most).",
              "", "## Greedy agreement (temperature 0, 100 tokens at most)", "",
              f"{ag['identical']} of {ag['prompts']} replies identical; characters before the first difference "
              "(prebuilt reply length): " + ", ".join(f"{c} ({n})" for c, n in zip(
                  ag["chars_before_first_difference"], ag["reply_chars_prebuilt"], strict=True)) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--native-dir", default=str(nb.cache_dir() / "xllamacpp-avx512"))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--long-prompt-tokens", type=int, default=4000)
    pause = Path("/work/decisive_run/pause.sh")
    ap.add_argument("--pause-script", default=str(pause) if pause.is_file() else "",
                    help="run (on bash's stdin) right before each timing phase; '' for none")
    ap.add_argument("--resume-script", default=str(pause.with_name("resume.sh")) if pause.is_file() else "")
    ap.add_argument("--max-pause-s", type=float, default=220.0, help="resume the background job after this")
    ap.add_argument("--nice", type=int, default=-20, help="our servers' priority during timing phases")
    ap.add_argument("--max-foreign-busy", type=float, default=0.1,
                    help="measure again when other processes used more than this share of the cores")
    ap.add_argument("--tries", type=int, default=3, help="measurements at most, per number")
    ap.add_argument("--gap-s", type=float, default=20.0, help="seconds between timing phases")
    ap.add_argument("--report", default=str(ROOT / "benchmarks" / "reports"))
    a = ap.parse_args(argv)
    # A SIGTERM must still run the finally blocks: the resume script, the servers' stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rep = run(a)
    out = Path(a.report)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runtime_speed.json").write_text(json.dumps(rep, indent=1) + "\n")
    (out / "runtime_speed.md").write_text(markdown(rep))
    print(markdown(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
