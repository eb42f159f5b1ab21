import pytest

from jobrec_core.config import load_config
from jobrec_core.search.connection import (
    EsConnection,
    EsConnectionError,
    connector_options,
    make_client,
    resolve_connection,
)


def tls_connection(**secrets):
    return EsConnection(
        nodes=("https://es1.example.org:9243", "https://es2.example.org:9243"),
        verify_certs=True,
        request_timeout_s=30,
        **secrets,
    )


def test_secrets_never_appear_in_repr():
    connection = tls_connection(username="svc", password="s3cr3t-value", api_key="k3y-value")
    assert "s3cr3t-value" not in repr(connection)
    assert "k3y-value" not in repr(connection)


def test_connector_options_for_a_tls_cluster_with_basic_auth():
    options = connector_options(tls_connection(username="svc", password="pw"))
    assert options["es.nodes"] == "es1.example.org,es2.example.org"
    assert options["es.port"] == "9243"
    assert options["es.net.ssl"] == "true"
    assert options["es.nodes.wan.only"] == "true"
    assert options["es.net.http.auth.user"] == "svc"
    assert options["es.net.http.auth.pass"] == "pw"


def test_connector_options_prefer_an_api_key():
    options = connector_options(tls_connection(username="svc", password="pw", api_key="abc"))
    assert options["es.net.http.header.Authorization"] == "ApiKey abc"
    assert "es.net.http.auth.user" not in options


def test_plain_http_node():
    connection = EsConnection(
        nodes=("http://127.0.0.1:9201",), verify_certs=False, request_timeout_s=5
    )
    options = connector_options(connection)
    assert (options["es.nodes"], options["es.port"], options["es.net.ssl"]) == (
        "127.0.0.1",
        "9201",
        "false",
    )
    make_client(connection)  # builds without contacting the node


def test_credentials_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("JOBREC_ES_USERNAME", "svc")
    monkeypatch.setenv("JOBREC_ES_PASSWORD", "from-env")
    config = load_config("base", ["elasticsearch.nodes=[https://es.example.org:9243]"])
    connection = resolve_connection(config)
    assert (connection.username, connection.password) == ("svc", "from-env")


def test_nodes_from_the_environment(monkeypatch):
    monkeypatch.setenv("JOBREC_ES_NODES", "https://a.example.org:9243,https://b.example.org:9243")
    config = load_config("base", ["elasticsearch.nodes=[]"])
    assert resolve_connection(config).nodes == (
        "https://a.example.org:9243",
        "https://b.example.org:9243",
    )


def test_no_node_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("JOBREC_ES_NODES", raising=False)
    config = load_config("base", ["elasticsearch.nodes=[]"])
    with pytest.raises(EsConnectionError, match="no Elasticsearch nodes configured"):
        resolve_connection(config)
    local = load_config("local", [f"elasticsearch.local.workdir={tmp_path}"])
    with pytest.raises(EsConnectionError, match="jobrec es start"):
        resolve_connection(local)
