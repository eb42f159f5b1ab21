"""Connections to Elasticsearch: the Python client and the ES-Hadoop connector, one source.

Both are built from one :class:`EsConnection` so that the connector (bulk writes from Spark)
and the client (searches, index administration) always talk to the same cluster with the same
credentials. Credentials come from environment variables or a Databricks secret scope named in
the configuration; they are never logged (the dataclass hides them from `repr`) and the Spark
session redacts the connector's credential options (see `jobrec_core.platform.spark`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from elasticsearch import Elasticsearch

from jobrec_core.config import JobrecConfig
from jobrec_core.search.local_node import LocalElasticsearch

ES_FORMAT = "org.elasticsearch.spark.sql"  # the ES-Hadoop connector's Spark SQL data source


class EsConnectionError(RuntimeError):
    """No usable Elasticsearch address or credentials."""


@dataclass(frozen=True)
class EsConnection:
    nodes: tuple[str, ...]
    verify_certs: bool
    request_timeout_s: float
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    api_key: str | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return any(urlparse(node).scheme == "https" for node in self.nodes)


def resolve_connection(config: JobrecConfig) -> EsConnection:
    """The cluster to use: configured nodes, or the running local node; secrets from outside."""
    es = config.elasticsearch
    nodes = tuple(es.nodes) or tuple(_secret(config, "nodes", "JOBREC_ES_NODES").split(","))
    nodes = tuple(n.strip() for n in nodes if n and n.strip())
    if not nodes and es.local.enabled:
        state = LocalElasticsearch(es.local).status()
        if state is None:
            raise EsConnectionError(
                "the local Elasticsearch node is not running: start it with `jobrec es start`"
            )
        nodes = (state.url,)
    if not nodes:
        raise EsConnectionError(
            "no Elasticsearch nodes configured: set elasticsearch.nodes, the JOBREC_ES_NODES "
            "environment variable, or the 'nodes' key of the secret scope"
        )
    return EsConnection(
        nodes=nodes,
        verify_certs=es.verify_certs,
        request_timeout_s=es.request_timeout_s,
        username=_secret(config, "username", es.auth.username_env) or None,
        password=_secret(config, "password", es.auth.password_env) or None,
        api_key=_secret(config, "api_key", es.auth.api_key_env) or None,
    )


def make_client(connection: EsConnection) -> Elasticsearch:
    """The official Python client for this connection."""
    options: dict[str, Any] = {
        "request_timeout": connection.request_timeout_s,
        "retry_on_timeout": True,
        "max_retries": 3,
    }
    if connection.uses_tls:
        options["verify_certs"] = connection.verify_certs
    if connection.api_key:
        options["api_key"] = connection.api_key
    elif connection.username:
        options["basic_auth"] = (connection.username, connection.password or "")
    return Elasticsearch(list(connection.nodes), **options)


def connector_options(connection: EsConnection) -> dict[str, str]:
    """ES-Hadoop settings (`es.*`) for Spark reads and writes on this connection.

    `es.nodes.wan.only` keeps the connector on the given addresses instead of discovering the
    nodes' internal ones, which are unreachable from a Databricks cluster (and irrelevant to a
    single local node).
    """
    first = urlparse(connection.nodes[0])
    options = {
        "es.nodes": ",".join(urlparse(n).hostname or n for n in connection.nodes),
        "es.port": str(first.port or (443 if first.scheme == "https" else 9200)),
        "es.nodes.wan.only": "true",
        "es.net.ssl": str(connection.uses_tls).lower(),
        "es.http.timeout": f"{int(connection.request_timeout_s)}s",
    }
    if connection.uses_tls and not connection.verify_certs:
        options["es.net.ssl.cert.allow.self.signed"] = "true"
    if connection.api_key:
        options["es.net.http.header.Authorization"] = f"ApiKey {connection.api_key}"
    elif connection.username:
        options["es.net.http.auth.user"] = connection.username
        options["es.net.http.auth.pass"] = connection.password or ""
    return options


def wait_for_primaries(client: Elasticsearch, index: str, timeout_s: float = 60.0) -> None:
    """Block until `index` can take writes (its primary shards are active), or raise with the
    cluster's own explanation. A write into an index whose primary is not assigned waits on
    the server and ends as a socket timeout, which the connector reports as "all nodes
    failed"; this turns it into the real reason (often a disk watermark)."""
    health = client.options(ignore_status=408).cluster.health(
        index=index, wait_for_status="yellow", timeout=f"{int(timeout_s)}s"
    )
    if health["status"] in ("yellow", "green"):
        return
    try:
        explanation = client.cluster.allocation_explain(index=index, shard=0, primary=True)
        reasons = [
            decider["explanation"]
            for node in explanation.get("node_allocation_decisions", [])
            for decider in node.get("deciders", [])
            if decider.get("decision") == "NO"
        ]
        detail = "; ".join(reasons) or str(explanation.get("allocate_explanation", ""))
    except Exception as error:  # the explanation is a courtesy, not the failure
        detail = f"no allocation explanation ({error})"
    raise EsConnectionError(
        f"the primary shard of {index} is not assigned after {timeout_s:.0f}s "
        f"(status {health['status']}): {detail}"
    )


def _secret(config: JobrecConfig, key: str, env_var: str) -> str:
    """An environment variable, else the key in the configured Databricks secret scope."""
    value = os.environ.get(env_var, "")
    scope = config.elasticsearch.auth.secret_scope
    if value or scope is None:
        return value
    return _databricks_secret(scope, key)


def _databricks_secret(scope: str, key: str) -> str:
    try:
        from pyspark.dbutils import DBUtils
        from pyspark.sql import SparkSession
    except ImportError:
        # Not on a Databricks runtime: secret scopes do not exist here.
        return ""
    spark = SparkSession.getActiveSession()
    if spark is None:
        return ""
    try:
        return str(DBUtils(spark).secrets.get(scope=scope, key=key))
    except Exception as error:  # the scope API raises its own types
        if "does not exist" in str(error):
            return ""
        raise EsConnectionError(f"cannot read secret {scope}/{key}: {error}") from None
