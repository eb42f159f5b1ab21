"""The connector's credentials are redacted by every session: the local one the code builds,
and the Databricks clusters the bundle declares, whose sessions the jobs reuse as they are."""

from __future__ import annotations

import pytest

from jobrec_core.devtools.bundle import load_bundle
from jobrec_core.platform.spark import (
    REDACTION_KEY,
    REDACTION_REGEX,
    redacts_connector_credentials,
)
from tests.helpers import REPO

SPARK_DEFAULT = r"(?i)secret|password|token|access[.]key"


def test_the_sessions_regex_hides_the_connectors_credentials_and_sparks_default_does_not():
    assert redacts_connector_credentials(REDACTION_REGEX)
    assert not redacts_connector_credentials(SPARK_DEFAULT)
    assert not redacts_connector_credentials(None)  # unset: Spark's default
    assert not redacts_connector_credentials("(?i)auth[.]pass")  # the API key header shows
    assert not redacts_connector_credentials("(?i)auth[.]pass|authorization(")  # unreadable


@pytest.mark.parametrize("target", ["dev", "staging", "prod"])
def test_every_cluster_of_the_bundle_redacts_as_the_local_session_does(target):
    bundle = load_bundle(
        REPO / "deploy", target, {"service_principal": "6a1a4b52-0000"}, environ={}
    )
    clusters = [
        (f"{job}.{cluster['job_cluster_key']}", cluster["new_cluster"])
        for job, spec in bundle.jobs.items()
        for cluster in spec.get("job_clusters", [])
    ]
    assert clusters
    for name, cluster in clusters:
        assert cluster.get("spark_conf", {}).get(REDACTION_KEY) == REDACTION_REGEX, name
