"""What every `recollect` subcommand shares: the user-facing error, and settings from the command line.

`recollect eval` (recollect.eval.cli) and the main command both build their context here, so a bad
`--set` is the same one-line error everywhere.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from recollect.graphs.registry import AllMethodsContext
from recollect.settings import setting_names


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def _parse_sets(pairs: list[str]) -> dict[str, Any]:
    """`--set key=value` overrides for any AllMethodsContext field; values are parsed as JSON when possible."""
    out: dict[str, Any] = {}
    names = set(setting_names(AllMethodsContext))
    for pair in pairs or []:
        if "=" not in pair:
            raise CLIError(f"--set expects key=value, got {pair!r}")
        key, raw = pair.split("=", 1)
        key = key.strip()
        if key not in names:
            raise CLIError(f"--set: unknown setting {key!r} (see `recollect settings`)")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _context(args: argparse.Namespace) -> AllMethodsContext:
    ctx = AllMethodsContext()
    overrides = _parse_sets(getattr(args, "set", []) or [])
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = args.data_dir
    return ctx.with_overrides(**overrides) if overrides else ctx
