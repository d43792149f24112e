"""What every `recollect` subcommand shares: the user-facing error, and settings from the command line.

`recollect eval` (recollect.eval.cli) and the main command both build their context here, so a bad
`--set` is the same one-line error everywhere.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from recollect.graphs.registry import METHODS, AllMethodsContext, context_class
from recollect.settings import setting_names


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def _settings_of(methods: Sequence[str]) -> set[str]:
    """The settings the given methods read: the shared ones and each method's own."""
    return set().union(*(setting_names(context_class(m)) for m in methods))


def _parse_sets(pairs: list[str], methods: Sequence[str] | None = None) -> dict[str, Any]:
    """`--set key=value` overrides; values are parsed as JSON when possible.

    `methods`: the methods the command runs. A setting none of them has is refused, naming the methods it
    belongs to (`ask -m rag --set hymem_light_k=3` would otherwise run as if it had not been given); None
    accepts any method's setting (the eval, which runs whichever methods it is told).
    """
    out: dict[str, Any] = {}
    names = set(setting_names(AllMethodsContext))
    allowed = names if methods is None else _settings_of(methods)
    for pair in pairs or []:
        if "=" not in pair:
            raise CLIError(f"--set expects key=value, got {pair!r}")
        key, raw = pair.split("=", 1)
        key = key.strip()
        if key not in names:
            raise CLIError(f"--set: unknown setting {key!r} (see `recollect settings`)")
        if key not in allowed:
            owners = [m for m in METHODS if key in _settings_of([m])]
            raise CLIError(f"--set: {key!r} is not a setting of {', '.join(methods or ())}: it belongs to "
                           f"{', '.join(owners)} (see `recollect settings`)")
        if key in out:
            raise CLIError(f"--set: {key!r} is given twice")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _context(args: argparse.Namespace, methods: Sequence[str] | None = None) -> AllMethodsContext:
    """The run's settings: defaults, `--set` (only settings of `methods`, when given) and `--data-dir`."""
    ctx = AllMethodsContext()
    overrides = _parse_sets(getattr(args, "set", []) or [], methods)
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = args.data_dir
    return ctx.with_overrides(**overrides) if overrides else ctx
