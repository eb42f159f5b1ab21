"""The local Elasticsearch node: a real server, reached over HTTP on 127.0.0.1."""

import json
import urllib.request

import elasticsearch
import pytest

from jobrec_core.config import load_config
from jobrec_core.search.connection import make_client, resolve_connection
from jobrec_core.search.local_node import LocalElasticsearch, LocalNodeError

pytestmark = pytest.mark.integration


def test_node_answers_as_elasticsearch(es_node):
    with urllib.request.urlopen(es_node.url) as response:
        info = json.loads(response.read())
        product = response.headers["X-elastic-product"]
    assert product == "Elasticsearch"
    assert info["tagline"] == "You Know, for Search"
    assert info["version"]["number"].startswith("8.")


def test_client_major_version_matches_the_server(config, es_node):
    client = make_client(resolve_connection(config))
    server_major = int(client.info()["version"]["number"].split(".")[0])
    assert server_major == elasticsearch.__version__[0]
    assert client.cluster.health()["status"] == "green"


def test_bound_to_loopback_only(config, es_node):
    client = make_client(resolve_connection(config))
    nodes = client.nodes.info(metric="http")["nodes"]
    addresses = [a for node in nodes.values() for a in node["http"]["bound_address"]]
    assert addresses
    assert all(a.startswith(("127.0.0.1:", "[::1]:")) for a in addresses)


def test_start_is_idempotent_and_status_reports_the_node(config, es_node):
    node = LocalElasticsearch(config.elasticsearch.local)
    assert node.start() == es_node
    assert node.status() == es_node


def test_a_second_node_starts_stops_and_cleans_up(tmp_path):
    config = load_config("local", [f"elasticsearch.local.workdir={tmp_path / 'es2'}"])
    node = LocalElasticsearch(config.elasticsearch.local)
    assert node.status() is None
    state = node.start()
    assert node.state_file.exists()
    assert node.stop(purge=True) is True
    assert node.status() is None
    assert not (tmp_path / "es2").exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(state.url, timeout=2)
    assert node.stop() is False


def test_missing_jars_are_a_clear_error(tmp_path):
    config = load_config(
        "local",
        [
            f"elasticsearch.local.workdir={tmp_path / 'es'}",
            f"elasticsearch.local.jars_dir={tmp_path / 'nojars'}",
        ],
    )
    with pytest.raises(LocalNodeError, match=r"jars not found.*scripts/setup.sh"):
        LocalElasticsearch(config.elasticsearch.local).start()


def test_missing_java_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    config = load_config("local", [f"elasticsearch.local.workdir={tmp_path / 'es'}"])
    with pytest.raises(LocalNodeError, match=r"Java 17\+ is needed"):
        LocalElasticsearch(config.elasticsearch.local).start()
