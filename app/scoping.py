"""Whose memory a tool or node reads and writes: the namespace comes from the app and the run, never the model.

A namespace is given as a template, filled from each run's `config["configurable"]` and the LangGraph runtime
context of the graph calling it (LangMem's `("memories", "{langgraph_user_id}")` works the same way):

- `"alice"`: fixed;
- `"{user_id}"` or `"team-{org_id}"`: `str.format` fields filled from the run (`{{` is a literal brace);
- `("memories", "{user_id}")`: a tuple's parts are filled and joined with "/" (`memories/alice`).

A field the run does not carry is an error naming it, never a default: one user's agent cannot end up
reading or writing a namespace shared by everyone. The filled namespace must be a valid namespace id.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from recollect.namespace_ids import NamespaceError, validate_namespace

NamespaceTemplate = str | tuple[str, ...]
_FORMATTER = string.Formatter()


def template_fields(template: NamespaceTemplate) -> list[str]:
    """The run values a template needs (`"{user_id}"` -> ["user_id"]); a malformed template is a NamespaceError."""
    parts = template if isinstance(template, tuple) else (template,)
    if not parts or not all(isinstance(p, str) for p in parts):
        raise NamespaceError(f"namespace template {template!r}: give a string or a tuple of strings")
    names: list[str] = []
    for part in parts:
        try:
            parsed = list(_FORMATTER.parse(part))
        except ValueError as exc:
            raise NamespaceError(f"namespace template {template!r}: {exc}") from None
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            if not name.isidentifier() or spec or conversion:
                raise NamespaceError(f"namespace template {template!r}: a field is a plain name such as "
                                     f"{{user_id}}, not {{{name}{'!' + conversion if conversion else ''}"
                                     f"{':' + spec if spec else ''}}}")
            names.append(name)
    return names


def check_template(template: NamespaceTemplate) -> NamespaceTemplate:
    """`template` when it is usable: a fixed namespace must be a valid id now, a template's fields plain names."""
    if not template_fields(template) and isinstance(template, str):
        validate_namespace(template.replace("{{", "{").replace("}}", "}"))
    return template


def runtime_context_value(key: str) -> Any:
    """`key` of the LangGraph runtime context when called from inside a graph (e.g. an agent's tool node)."""
    try:
        from langgraph.runtime import get_runtime

        runtime = get_runtime()
    except (ImportError, RuntimeError):
        return None
    context = getattr(runtime, "context", None)
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def fill_namespace(template: NamespaceTemplate, config: Mapping[str, Any] | None) -> str:
    """The namespace `template` names for a run with `config`: fields from `configurable`, else the runtime context."""
    configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}
    values: dict[str, str] = {}
    for name in template_fields(template):
        value = configurable.get(name)
        if value is None:
            value = runtime_context_value(name)
        if value is None or value == "":
            raise NamespaceError(f"no namespace: the template {template!r} needs {name!r} in the run's "
                                 "config['configurable'] or its context")
        values[name] = str(value)
    parts = template if isinstance(template, tuple) else (template,)
    return validate_namespace("/".join(part.format_map(values) for part in parts))
