"""Probe recollect's whole surface with bad input, clients reaching past their rights and junk model replies,
and count what was tried, what behaved (clean) and what did not (failed).

No real model and no network: every model call goes to the scripted endpoint of the service tests
(tests/service/scripted_endpoint.py), embeddings are the hashing embedder, and the dialogues are made up
(benchmarks/probes/common.py). Servers bind 127.0.0.1 on free ports; everything is written under a
temporary directory that is removed at the end.

    python -m benchmarks.probes.run [--surfaces cli,python,server] [--out FILE.md]

Exit status 0 when every failure is a known one owned elsewhere (listed with `known:`), else 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

SURFACES = ("cli", "python", "server")


def _environment(base_url: str) -> None:
    """Every recollect setting that could reach a real model or the network, pointed away from it."""
    os.environ.update(RECOLLECT_EMBEDDER="hash", RECOLLECT_LLM_BASE_URL=base_url, RECOLLECT_LLM_MODEL="scripted",
                      RECOLLECT_LLM_API_KEY="scripted", RECOLLECT_LLM_MAX_RETRIES="0", ANONYMIZED_TELEMETRY="False",
                      LANGSMITH_TRACING="false")
    for name in ("RECOLLECT_AUTH_FILE", "RECOLLECT_POSTGRES_URI", "RECOLLECT_CHROMA_URL", "RECOLLECT_MODELS",
                 "RECOLLECT_AUX_LLM_BASE_URL", "RECOLLECT_JUDGE_BASE_URL"):
        os.environ.pop(name, None)
    from recollect.settings import get_settings

    get_settings.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surfaces", default=",".join(SURFACES), help=f"comma-separated, of {', '.join(SURFACES)}")
    parser.add_argument("--out", help="also write the counts and every outcome here (.md, with a .json beside it)")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.surfaces.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SURFACES))
    if unknown or not chosen:
        parser.error(f"--surfaces: choose among {', '.join(SURFACES)}")

    from benchmarks.probes.common import Tally
    from tests.service.scripted_endpoint import ScriptedEndpoint

    tally = Tally()
    start = time.monotonic()
    with ScriptedEndpoint() as base_url, tempfile.TemporaryDirectory(prefix="recollect-probes-") as tmp:
        _environment(base_url)
        work = Path(tmp)
        if "cli" in chosen:
            from benchmarks.probes import cli_probes

            cli_probes.run(tally, work / "cli")
        if "python" in chosen:
            from benchmarks.probes import api_probes

            api_probes.run(tally, work / "python")
        if "server" in chosen:
            from benchmarks.probes import server_probes

            server_probes.run(tally, work / "server", base_url)
    report = tally.report() + f"\n\n{time.monotonic() - start:.0f} s; `python -m benchmarks.probes.run " \
                              f"--surfaces {','.join(chosen)}`\n"
    print("\n" + report)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"# recollect probes\n\n{report}", encoding="utf-8")
        out.with_suffix(".json").write_text(tally.as_json(), encoding="utf-8")
    unexpected = [o for o in tally.outcomes if not o.clean and not o.known]
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
