"""The local session's driver JVM runs with the configured JVM options, Derby's folder added;
a session reused on a cluster is checked for the redaction of the connector's credentials."""

import logging

from jobrec_core.platform.spark import REDACTION_KEY, get_spark, redacts_connector_credentials


def test_the_driver_runs_the_configured_collector_and_keeps_derby_in_the_store(spark, config):
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert config.spark.conf["spark.driver.extraJavaOptions"] == "-XX:+UseParallelGC"
    assert "-XX:+UseParallelGC" in arguments
    assert f"-Dderby.system.home={config.path('derby')}" in arguments


def test_a_reused_session_that_redacts_the_credentials_is_taken_as_it_is(spark, config, caplog):
    """On a cluster (`spark.master: null`) the active session is reused; this one redacts the
    connector's credentials, so nothing is said about it."""
    cluster = config.model_copy(update={"spark": config.spark.model_copy(update={"master": None})})
    with caplog.at_level(logging.WARNING, logger="jobrec_core.platform.spark"):
        assert get_spark(cluster) is spark
    assert redacts_connector_credentials(spark.conf.get(REDACTION_KEY, None))
    assert REDACTION_KEY not in caplog.text
