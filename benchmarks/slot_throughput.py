"""Aggregate decode throughput of the embedded server with 1..N requests decoded together.

    RECOLLECT_LOCAL_PARALLEL=3 python benchmarks/slot_throughput.py [--tokens 200]

Starts the embedded server with `RECOLLECT_LOCAL_PARALLEL` slots, then sends k identical generation
requests at once for k = 1..slots (greedy, `--tokens` each, the same short prompt, so after the warm-up
call prefill is a cache hit and the time is decode) and prints generated tokens ÷ wall seconds. Whether
more slots pay depends on whether decode is bound by memory bandwidth (batching helps) or by compute
(it does not); this says which on the machine at hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = ("Write a list of 40 everyday household objects, one per line, each with a one-sentence description "
          "of what it is used for.")


def generate(url: str, alias: str, tokens: int) -> int:
    body = {"model": alias, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": tokens,
            "temperature": 0}
    req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return int(json.load(r)["usage"]["completion_tokens"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=200, help="tokens generated per request")
    args = ap.parse_args()
    from recollect.llm.local_runtime import LocalServer
    from recollect.settings import get_settings

    slots = get_settings().local_parallel
    with LocalServer() as srv:
        generate(srv.base_url, srv.spec.alias, 8)  # warm-up: loads the prompt into the cache
        for k in range(1, slots + 1):
            start = time.monotonic()
            with ThreadPoolExecutor(k) as pool:
                made = sum(pool.map(lambda _: generate(srv.base_url, srv.spec.alias, args.tokens), range(k)))
            wall = time.monotonic() - start
            print(f"{k} request(s) at once: {made} tokens in {wall:.1f} s = {made / wall:.1f} tokens/s", flush=True)


if __name__ == "__main__":
    main()
