"""The local session's driver JVM runs with the configured JVM options, Derby's folder added."""


def test_the_driver_runs_the_configured_collector_and_keeps_derby_in_the_store(spark, config):
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert config.spark.conf["spark.driver.extraJavaOptions"] == "-XX:+UseParallelGC"
    assert "-XX:+UseParallelGC" in arguments
    assert f"-Dderby.system.home={config.path('derby')}" in arguments
