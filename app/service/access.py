"""Who may do what on `recollect serve`: the auth file, server-only keys and the namespaces a request names.

Plain functions with no server behind them: `recollect.service.auth` wires them into LangGraph's auth
handlers, `recollect serve` reads the auth file before it starts (a bad file is one clear CLI error), and
the unit tests call them directly. A refusal is an `AccessError` carrying its HTTP status; no message
holds an API key, a file's contents or another user's data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recollect.settings import PYTHON_ONLY, SERVER_ONLY, Settings
from recollect.state import NamespaceBindingError, bind_namespace

# An API key shorter than this is too easy to guess for a server others can reach.
MIN_KEY_CHARS = 16
# Where the server reads and writes and which model it calls: a key of this shape is never a run setting,
# so a setting added later with such a name is refused too instead of reaching a graph.
_SERVER_SUFFIXES = ("_dir", "_path", "_file", "_url", "_api_key")
SERVER_ONLY_KEYS = frozenset(Settings.model_fields) | SERVER_ONLY | PYTHON_ONLY | {"embedder", "prompts_dir"}


class AccessError(Exception):
    """A request the server refuses; `status` is the HTTP status it answers with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AuthFileError(ValueError):
    """The auth file cannot be used; the message names the file and the entry, never a key."""


@dataclass(frozen=True)
class Account:
    """One API key's user and the namespaces it may read and write."""

    user: str
    namespaces: frozenset[str]


def key_digest(key: str) -> str:
    """Keys are held by digest: the server keeps no key in memory it could log, and a lookup compares
    digests, not the key text."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def load_auth_file(path: str | Path) -> dict[str, Account]:
    """`{key digest: Account}` from a JSON object `{"<api key>": {"user": ..., "namespaces": [...]}}`."""
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AuthFileError(f"auth file {p}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise AuthFileError(f"auth file {p}: not valid JSON{where}") from None
    if not isinstance(data, dict) or not data:
        raise AuthFileError(f"auth file {p}: expected a non-empty JSON object of API key -> "
                            '{"user": ..., "namespaces": [...]}')
    accounts: dict[str, Account] = {}
    for position, (key, entry) in enumerate(data.items(), start=1):
        where = f"auth file {p}: entry {position}"
        if not isinstance(key, str) or len(key.strip()) < MIN_KEY_CHARS or key != key.strip():
            raise AuthFileError(f"{where}: the API key must be at least {MIN_KEY_CHARS} characters, "
                                "with no surrounding spaces")
        if not isinstance(entry, dict):
            raise AuthFileError(f"{where}: expected an object with 'user' and 'namespaces'")
        user = entry.get("user")
        if not isinstance(user, str) or not user.strip():
            raise AuthFileError(f"{where}: 'user' must be a non-empty string")
        names = entry.get("namespaces")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise AuthFileError(f"{where} (user {user!r}): 'namespaces' must be a non-empty list of names")
        unknown = sorted(set(entry) - {"user", "namespaces"})
        if unknown:
            raise AuthFileError(f"{where} (user {user!r}): unknown field(s) {', '.join(unknown)}")
        accounts[key_digest(key)] = Account(user=user, namespaces=frozenset(names))
    return accounts


def account_for_key(known: Mapping[str, Account], key: str) -> Account:
    """The account an API key (the `x-api-key` header) names; 401 when it is missing or unknown."""
    key = key.strip()
    if not key:
        raise AccessError(401, "missing API key: send it in the x-api-key header (the SDK's api_key=)")
    account = known.get(key_digest(key))
    if account is None:
        raise AccessError(401, "unknown API key")
    return account


def is_server_only(key: Any) -> bool:
    return isinstance(key, str) and (key in SERVER_ONLY_KEYS or key.endswith(_SERVER_SUFFIXES))


def reject_server_only(values: Any, where: str) -> None:
    """400 when `values` (a run's context or configurable) names server configuration."""
    if not isinstance(values, Mapping):
        return
    bad = sorted(k[:60] for k in values if is_server_only(k))
    if bad:
        raise AccessError(400, f"{where} may not set {', '.join(bad)}: the data directory, stores, model "
                               "endpoints and keys and file paths are the server's configuration "
                               "(`recollect serve` options and RECOLLECT_* environment variables)")


def _namespace_value(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise AccessError(400, f"{where}: namespace must be a string")
    return value


def _command_update(command: Any) -> dict[str, Any]:
    """A Command's `update` as a dict (the SDK sends a dict or a list of [key, value] pairs)."""
    update = command.get("update") if isinstance(command, Mapping) else None
    if isinstance(update, Mapping):
        return dict(update)
    if isinstance(update, list):
        return {pair[0]: pair[1] for pair in update if isinstance(pair, list | tuple) and len(pair) == 2}
    return {}


@dataclass(frozen=True)
class RunNamespaces:
    """The namespaces a run names: in its input (or a Command's update), and in its settings (context or
    configurable, read only when the thread and the input name none)."""

    input: frozenset[str]
    settings: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.input | self.settings


def run_namespaces(kwargs: Mapping[str, Any]) -> RunNamespaces:
    """What a `threads.create_run` request's `kwargs` name (input, command, context, config.configurable)."""
    given = kwargs.get("input")
    named = {_namespace_value(given.get("namespace"), "input") if isinstance(given, Mapping) else None,
             _namespace_value(_command_update(kwargs.get("command")).get("namespace"), "command.update")}
    configurable = (kwargs.get("config") or {}).get("configurable") or {}
    settings = {_namespace_value(values.get("namespace"), where)
                for values, where in ((kwargs.get("context") or {}, "context"), (configurable, "configurable"))
                if isinstance(values, Mapping)}
    return RunNamespaces(frozenset(named - {None}), frozenset(settings - {None}))  # type: ignore[arg-type]


def check_run_payload(kwargs: Mapping[str, Any], *, restricted: bool) -> RunNamespaces:
    """Refuse server configuration in a run, and (with auth on) commands that write state or route
    around the question lifecycle; returns the namespaces the run names."""
    reject_server_only(kwargs.get("context"), "a run's context (or config.configurable)")
    reject_server_only((kwargs.get("config") or {}).get("configurable"), "a run's config.configurable")
    command = kwargs.get("command")
    if restricted and isinstance(command, Mapping) and (command.get("update") or command.get("goto")):
        raise AccessError(403, "with auth on, a run's command may only resume (no update or goto)")
    return run_namespaces(kwargs)


def thread_namespace(values: Any) -> str | None:
    """The namespace a thread is bound to: the one its checkpointed state holds."""
    found = values.get("namespace") if isinstance(values, Mapping) else None
    return found if isinstance(found, str) and found else None


def check_binding(thread_id: Any, bound: str | None, named: Iterable[str]) -> None:
    """A thread keeps its first namespace (`recollect.state.bind_namespace`, the rule the graph's `namespace`
    channel enforces): a run naming another is refused with 409 before it is queued."""
    for name in sorted(named):
        try:
            bind_namespace(bound, name, thread=f"thread {thread_id}")
        except NamespaceBindingError as exc:
            raise AccessError(409, str(exc)) from None


def check_allowed(account: Account, names: Iterable[str | None]) -> None:
    """403 unless every named namespace is one of the account's."""
    outside = sorted(n for n in names if n is not None and n not in account.namespaces)
    if outside:
        raise AccessError(403, f"user {account.user!r} may not use namespace {outside[0][:200]!r}")


def check_settings_payload(value: Mapping[str, Any], what: str, account: Account | None) -> None:
    """An assistant's (or cron's) stored settings: no server configuration, and only the caller's namespaces."""
    context = value.get("context")
    configurable = (value.get("config") or {}).get("configurable")
    reject_server_only(context, f"{what}'s context")
    reject_server_only(configurable, f"{what}'s config.configurable")
    if account is not None:
        names = [_namespace_value(v.get("namespace"), what) for v in (context, configurable) if isinstance(v, Mapping)]
        check_allowed(account, names)


# Store actions that change items: recollect's memories are written by `ingest` and removed by `forget`
# only, so a store client never leaves a memory that no builder made (or half of one).
_STORE_WRITES = frozenset({"put", "delete"})


def check_store_namespace(account: Account, namespace: Any, action: str) -> None:
    """A store request names one of the caller's namespaces: either recollect's memories of it,
    `("recollect", <namespace label>, ...)`, which clients may read (get, search, list) but not write, or
    the app's own items under a tuple that starts with the namespace itself, which they may also write."""
    from recollect.memory.store_docs import ROOT, ns_label

    parts = list(namespace) if isinstance(namespace, list | tuple) else []
    first = parts[0] if parts else None
    if first == ROOT:
        mine = {ns_label(ns) for ns in account.namespaces}
        if len(parts) < 2 or parts[1] not in mine:
            raise AccessError(403, f"store {action}: name one of your namespaces after {ROOT!r}")
        if action in _STORE_WRITES:
            raise AccessError(403, f"store {action}: recollect's memories are read-only here; use the ingest "
                                   "and forget graphs")
        return
    if not isinstance(first, str) or first not in account.namespaces:
        raise AccessError(403, f"store {action}: the namespace must start with one of your namespaces")


def owned(metadata: Any, user: str) -> None:
    """Stamp the owner on metadata the server is about to store (a client's own `owner` is replaced)."""
    if isinstance(metadata, dict):
        metadata.pop("created_by", None)  # "system" marks the server's own assistants, readable by all
        metadata["owner"] = user
