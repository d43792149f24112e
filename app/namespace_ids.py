"""What a namespace id may be: the app's own id for a user or conversation (`a@b.com`, `auth0|123`, any script).

A module of its own with no dependencies, so that `recollect.settings` (which must stay light: the model
server's guard imports it) checks the `namespace` setting by the same rule as every store does.
"""

from __future__ import annotations

NAMESPACE_MAX_CHARS = 200


class NamespaceError(ValueError):
    """A namespace name is invalid, or it has never been ingested."""


def namespace_problem(namespace: object) -> str | None:
    """Why `namespace` is not a valid id, or None: any printable text of 1–200 characters that neither
    starts nor ends with a space."""
    if not isinstance(namespace, str):
        return "it must be a string"
    if not namespace:
        return "it is empty"
    if len(namespace) > NAMESPACE_MAX_CHARS:
        return f"{len(namespace)} characters, at most {NAMESPACE_MAX_CHARS} are allowed"
    if not namespace.isprintable():
        bad = next(c for c in namespace if not c.isprintable())
        return f"it holds the non-printable character {bad!r}"
    if namespace != namespace.strip():
        return "it starts or ends with a space"
    return None


def validate_namespace(namespace: object) -> str:
    """`namespace` when it is a valid id, else a `NamespaceError` saying why."""
    problem = namespace_problem(namespace)
    if problem is None:
        return namespace  # type: ignore[return-value]
    if not isinstance(namespace, str):
        raise NamespaceError(f"invalid namespace {namespace!r}: {problem}")
    shown = repr(namespace) if len(namespace) <= 60 else repr(namespace[:60]) + "…"
    raise NamespaceError(f"invalid namespace {shown}: {problem} (use 1–{NAMESPACE_MAX_CHARS} printable characters)")
