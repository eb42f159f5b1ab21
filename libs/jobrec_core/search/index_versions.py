"""Versions of the jobs index behind its alias: list, swap, prune, roll back.

Searchers only ever see the alias; a new version is built beside the old one and the alias
moves in one atomic request, so no search sees a half-built index.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from elasticsearch import Elasticsearch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexVersion:
    name: str
    complete: bool
    aliased: bool
    # what the alias named when this version replaced it (its `_meta`): the rollback target;
    # empty for the first version, or one built before it was recorded
    replaced: tuple[str, ...] = ()


def history_alias(alias: str) -> str:
    """The alias of dated data's version of every ad posted by the run's as-of date, expired
    ones included (`indexing.stage`), beside `alias`'s version of the ads live then."""
    return f"{alias}_history"


def list_versions(client: Elasticsearch, alias: str) -> list[IndexVersion]:
    """The versions of `alias` built by this module, newest first."""
    found = client.indices.get(index=f"{alias}_v*", expand_wildcards="open,closed")
    versions = []
    for name, body in found.items():
        meta = body.get("mappings", {}).get("_meta", {}).get("jobrec")
        if meta is None or meta.get("alias") != alias:
            continue  # not ours (or a dead-letter index, which has no _meta)
        versions.append(
            IndexVersion(
                name=name,
                complete=bool(meta.get("complete")),
                aliased=alias in body.get("aliases", {}),
                replaced=tuple(meta.get("replaced", ())),
            )
        )
    return sorted(versions, key=lambda v: v.name, reverse=True)


def aliased_indices(client: Elasticsearch, alias: str) -> list[str]:
    """The indices `alias` points to now, sorted (none when it is not set)."""
    return (
        sorted(client.indices.get_alias(name=alias))
        if client.indices.exists_alias(name=alias)
        else []
    )


def swap_alias(client: Elasticsearch, alias: str, index: str) -> list[str]:
    """Point `alias` at `index` alone, atomically; returns the indices it pointed to before."""
    current = aliased_indices(client, alias)
    actions: list[dict[str, Any]] = [
        {"remove": {"index": old, "alias": alias}} for old in current if old != index
    ]
    actions.append({"add": {"index": index, "alias": alias}})
    client.indices.update_aliases(actions=actions)
    log.info("alias %s -> %s (was %s)", alias, index, ", ".join(current) or "unset")
    return current


def prune_versions(
    client: Elasticsearch, alias: str, keep: int, also_keep: Collection[str]
) -> list[str]:
    """Delete all but the `keep` newest complete versions, failed builds, stray dead letters.

    The version the alias points to is never deleted, nor those in `also_keep`: a build
    passes the versions its swap moved the alias away from, which served a moment ago and are
    the rollback target whether or not they are among the newest (after a rollback they are
    not). Runs must not overlap: a build under way in another run looks like a failed one.
    """
    versions = list_versions(client, alias)
    keep_names = versions_to_keep(versions, keep, also_keep)
    doomed = [v.name for v in versions if v.name not in keep_names]
    strays = [
        name
        for name in client.indices.get(index=f"{alias}_v*{DEAD_LETTER_SUFFIX}")
        if name.removesuffix(DEAD_LETTER_SUFFIX) not in keep_names
    ]
    for name in doomed + strays:
        client.options(ignore_status=404).indices.delete(index=name)
    if doomed:
        log.info("removed old or failed versions: %s", ", ".join(doomed))
    return doomed


def versions_to_keep(
    versions: list[IndexVersion], keep: int, also_keep: Collection[str]
) -> set[str]:
    """The names :func:`prune_versions` keeps of `versions` (newest first): the `keep` newest
    complete ones, the aliased ones and `also_keep`."""
    complete = [v.name for v in versions if v.complete]
    aliased = {v.name for v in versions if v.aliased}
    return set(complete[:keep]) | aliased | set(also_keep)


def rollback(client: Elasticsearch, alias: str, to: str | None = None) -> tuple[list[str], str]:
    """Point `alias` back at a kept version: `to`, or the one the current version replaced
    (its `_meta`), or, without that record, the newest complete one older than the current.
    The record matters after a rollback and a rebuild: the newest older version is then the
    bad one rolled back from, not the one that served before the rebuild. Returns (indices
    it pointed to, the index it points to now)."""
    versions = list_versions(client, alias)
    current = [v.name for v in versions if v.aliased]
    if to is None:
        complete = {v.name for v in versions if v.complete and not v.aliased}
        replaced = [n for v in versions if v.aliased for n in v.replaced if n in complete]
        older = [n for n in sorted(complete, reverse=True) if not current or n < current[0]]
        if not replaced and not older:
            raise IndexBuildError(f"no complete version of {alias} older than {current} is kept")
        to = max(replaced) if replaced else older[0]
    elif not any(v.name == to and v.complete for v in versions):
        raise IndexBuildError(
            f"{to} is not a complete version of {alias} (kept: {[v.name for v in versions]})"
        )
    return swap_alias(client, alias, to), to


def wait_for_cluster(client: Elasticsearch, timeout_s: float) -> None:
    """Block until the cluster answers with yellow or green health (e.g. after a restart)."""
    deadline = time.monotonic() + timeout_s
    last_error = "no answer"
    while time.monotonic() < deadline:
        try:
            status = client.cluster.health(wait_for_status="yellow", timeout="5s")["status"]
            if status in ("yellow", "green"):
                return
            last_error = f"status {status}"
        except Exception as error:  # connection refused while the node restarts
            last_error = type(error).__name__
        time.sleep(1.0)
    raise IndexBuildError(
        f"Elasticsearch did not come back within {timeout_s:.0f}s ({last_error}); "
        f"raise indexing.health_timeout_s or check the cluster"
    )


def root_cause(error: BaseException) -> str:
    """The innermost JVM exception of a failed Spark action, in one line (else the error)."""
    java = getattr(error, "java_exception", None)
    if java is None:
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    while java.getCause() is not None and java.getCause() != java:
        java = java.getCause()
    return str(java.toString()).splitlines()[0]


DEAD_LETTER_SUFFIX = "-rejected"


class IndexBuildError(RuntimeError):
    """The new index could not be completed; the alias still points to the previous one."""
