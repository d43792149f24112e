"""LangGraph auth for `recollect serve` (the generated langgraph.json's `auth.path`).

Always installed, so two rules hold with auth on or off: a client never sets server configuration (a run's or
an assistant's `data_dir`, endpoints, keys, paths: 400, where LangGraph would silently drop them), and a
thread keeps the namespace it first read (409).

`RECOLLECT_AUTH_FILE` (`recollect serve --auth-file`) turns per-user auth on: each request's `x-api-key`
header (the SDK's `api_key=`) names a user and the namespaces it may read and write (no or an unknown key:
401). Runs, ingest and forget may name only those namespaces, the store holds items under them, threads
and assistants belong to their creator (`owner` metadata) and others never see them, and requests the
rules do not cover (crons, direct edits of a thread's state) are refused (403).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from langgraph_sdk import Auth

from recollect.service.access import (
    AccessError,
    Account,
    account_for_key,
    check_allowed,
    check_binding,
    check_run_payload,
    check_settings_payload,
    check_store_namespace,
    load_auth_file,
    owned,
    reject_server_only,
    thread_namespace,
)
from recollect.settings import get_settings

auth = Auth()
LOCAL_USER = "local"  # every caller when auth is off


@lru_cache(maxsize=1)
def accounts() -> dict[str, Account] | None:
    """The auth file's accounts by key digest; None when auth is off."""
    path = get_settings().auth_file
    return load_auth_file(path) if path else None


def _refuse(exc: AccessError) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=exc.status, detail=str(exc))


def caller(ctx: Auth.types.AuthContext) -> Account | None:
    """The caller's account; None when auth is off. With auth on, a user this module did not authenticate
    (none should reach here) gets no namespace at all."""
    if accounts() is None:
        return None
    names = getattr(ctx.user, "namespaces", None)
    return Account(user=ctx.user.identity, namespaces=frozenset(names or ()))


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> Auth.types.MinimalUserDict:
    known = accounts()
    if known is None:
        return {"identity": LOCAL_USER}
    try:
        account = account_for_key(known, (headers.get(b"x-api-key") or b"").decode("utf-8", errors="replace"))
    except AccessError as exc:
        raise _refuse(exc) from None
    return {"identity": account.user, "namespaces": sorted(account.namespaces)}  # type: ignore[typeddict-unknown-key]


@auth.on
async def everything_else(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Requests no rule below covers (crons, ...): open without auth; with auth refused rather than
    allowed unchecked."""
    if caller(ctx) is not None:
        raise Auth.exceptions.HTTPException(status_code=403, detail=f"{ctx.resource}.{ctx.action} is not "
                                                                    "available when the server runs with auth")
    if ctx.resource == "crons":
        payload = value.get("payload") if isinstance(value, dict) else None
        try:
            reject_server_only((payload or {}).get("context"), "a cron's context")
            reject_server_only(((payload or {}).get("config") or {}).get("configurable"), "a cron's config")
        except AccessError as exc:
            raise _refuse(exc) from None


async def _thread_values(thread_id: Any) -> Any:
    """The thread's latest state values, read back through the server as the caller (so a thread the caller
    does not own reads as missing); None when there is none."""
    from langgraph_sdk import get_client

    async def read() -> Any:
        try:
            return (await get_client().threads.get(str(thread_id))).get("values")
        except Exception:  # a missing or foreign thread: the run itself is refused by LangGraph
            return None

    # A task of its own: the loopback request sets the auth context variable, which must not leak into the
    # rest of this request's checks.
    return await asyncio.create_task(read())


@auth.on.threads.create_run
async def on_run(ctx: Auth.types.AuthContext, value: Mapping[str, Any]) -> Auth.types.FilterType | None:
    account = caller(ctx)
    try:
        named = check_run_payload(value.get("kwargs") or {}, restricted=account is not None)
        thread_id = value.get("thread_id")
        bound = thread_namespace(await _thread_values(thread_id)) if thread_id else None
        if account is not None:
            check_allowed(account, [*named.all, bound])
        check_binding(thread_id, bound, named.input)
    except AccessError as exc:
        raise _refuse(exc) from None
    if account is None:
        return None
    owned(value.get("metadata"), account.user)  # a thread this run creates is the caller's
    return {"owner": account.user}


@auth.on.threads.create
async def on_thread_create(ctx: Auth.types.AuthContext, value: Mapping[str, Any]) -> Auth.types.FilterType | None:
    account = caller(ctx)
    if account is None:
        return None
    owned(value.get("metadata"), account.user)
    return {"owner": account.user}


@auth.on.threads.update
async def on_thread_update(ctx: Auth.types.AuthContext, value: Mapping[str, Any]) -> Auth.types.FilterType | None:
    account = caller(ctx)
    if account is None:
        return None
    if "metadata" not in value and not value.get("action"):
        # update_state / create(supersteps=...): it could write a namespace the caller may not read
        raise Auth.exceptions.HTTPException(status_code=403, detail="editing a thread's state is not available "
                                                                    "when the server runs with auth; start a run")
    owned(value.get("metadata"), account.user)
    return {"owner": account.user}


@auth.on.threads.read
@auth.on.threads.delete
async def on_thread_access(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    account = caller(ctx)
    return None if account is None else {"owner": account.user}


@auth.on.threads.search
async def on_thread_search(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Only the caller's threads; searching by a namespace that is not the caller's is refused outright."""
    account = caller(ctx)
    if account is None:
        return None
    values = value.get("values") if isinstance(value, dict) else None
    try:
        check_allowed(account, [values.get("namespace") if isinstance(values, dict) else None])
    except AccessError as exc:
        raise _refuse(exc) from None
    return {"owner": account.user}


async def on_assistant_write(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    account = caller(ctx)
    try:
        check_settings_payload(value, "an assistant", account)
    except AccessError as exc:
        raise _refuse(exc) from None
    if account is None:
        return None
    owned(value.get("metadata"), account.user)
    return {"owner": account.user}  # the server's own assistants (created_by system) stay unchanged


# Registered by calls, not stacked decorators: each decorator returns the handler typed for its own action only.
auth.on.assistants.create(on_assistant_write)
auth.on.assistants.update(on_assistant_write)


async def on_assistant_read(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    account = caller(ctx)
    if account is None:
        return None
    # langgraph_sdk's FilterType leaves out "$or", which the server's filters take (langgraph_runtime_inmem.ops)
    return {"$or": [{"owner": account.user}, {"created_by": "system"}]}  # type: ignore[return-value]


auth.on.assistants.read(on_assistant_read)
auth.on.assistants.search(on_assistant_read)


@auth.on.assistants.delete
async def on_assistant_delete(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    account = caller(ctx)
    return None if account is None else {"owner": account.user}


@auth.on.store
async def on_store(ctx: Auth.types.AuthContext, value: Any) -> None:
    account = caller(ctx)
    if account is None:
        return
    try:
        check_store_namespace(account, value.get("namespace"), ctx.action)
    except AccessError as exc:
        raise _refuse(exc) from None
