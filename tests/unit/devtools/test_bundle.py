"""The Databricks bundle (deploy/), checked without a workspace: resolved for every target,
each job validated against the official `databricks-bundles` job models, each task's entry
point found in the wheel that the bundle builds, its arguments parsed by the job's own parser."""

from __future__ import annotations

import copy
import dataclasses
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from configparser import ConfigParser

import pytest

from jobrec_core.cli import main as jobrec
from jobrec_core.devtools.bundle import (
    Bundle,
    BundleError,
    check_bundle,
    check_entry_points,
    check_workflows,
    load_bundle,
    task_order,
    validate_jobs,
)
from tests.helpers import REPO

DEPLOY = REPO / "deploy"
CONF = REPO / "conf"
PROD_VALUES = {"storage_root": "abfss://jobrec@example.dfs.core.windows.net/prod"}
SERVICE_PRINCIPAL = {"service_principal": "6a1a4b52-0000-4000-8000-000000000000"}
TARGET_VALUES = {
    "dev": {},
    "staging": SERVICE_PRINCIPAL,
    "prod": {**PROD_VALUES, **SERVICE_PRINCIPAL},
}
PIPELINE = [
    "ingest",
    "train_embeddings",
    "clean_candidates",
    "index_jobs",
    "build_pairs",
    "train_drmm",
    "evaluate",
    "promote_model",
    "recommend",
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel exactly as the bundle's artifact builds it."""
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "--wheel-dir",
            str(folder),
            str(REPO),
        ],
        check=True,
    )
    [built] = folder.glob("jobrec-*.whl")
    return zipfile.ZipFile(built)


@pytest.fixture(scope="module")
def entry_points(wheel) -> dict[str, str]:
    [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser = ConfigParser()
    parser.read_string(wheel.read(name).decode())
    return dict(parser["console_scripts"])


def bundle(target: str = "dev") -> Bundle:
    return load_bundle(DEPLOY, target, TARGET_VALUES[target], environ={})


@pytest.mark.parametrize("target", list(TARGET_VALUES))
def test_every_target_resolves_and_passes_every_check(target, entry_points):
    resolved = bundle(target)
    assert resolved.target == target
    assert set(resolved.jobs) == {
        "jobrec_pipeline",
        "jobrec_recommend",
        "jobrec_check_stack",
        "jobrec_generate_data",
    }
    assert check_bundle(resolved, entry_points, CONF) == []


def test_every_task_runs_a_script_of_the_wheel_with_the_jobs_own_arguments(wheel, entry_points):
    files = set(wheel.namelist())
    tasks = list(bundle().wheel_tasks())
    assert len(tasks) == 11
    for task in tasks:
        assert task.package == "jobrec"
        module, function = entry_points[task.entry_point].split(":")
        assert function == "run" and f"{module.replace('.', '/')}.py" in files
        stage = module.removeprefix("jobrec_core.entrypoints.")
        assert task.entry_point == "jobrec-" + stage.replace("_", "-")
        assert (REPO / "jobs" / f"{stage}.py").exists()  # what spark-submit runs locally
        assert task.parameters[:2] == ["--env", "databricks"]
    assert "jobrec_core/devtools/bundle.py" in files and "jobrec_core/resources/" in " ".join(files)


def test_the_pipeline_runs_the_stages_in_order_and_then_the_recommendations():
    resolved = bundle("prod")
    pipeline = resolved.jobs["jobrec_pipeline"]
    order = task_order(pipeline)
    assert order is not None and sorted(order) == sorted(PIPELINE)
    assert [key for key in order if key not in ("clean_candidates", "index_jobs")] == [
        key for key in PIPELINE if key not in ("clean_candidates", "index_jobs")
    ]
    tasks = {task["task_key"]: task for task in pipeline["tasks"]}
    assert {d["task_key"] for d in tasks["build_pairs"]["depends_on"]} == {
        "clean_candidates",
        "index_jobs",
    }
    assert tasks["recommend"]["run_job_task"]["job_id"] == "${resources.jobs.jobrec_recommend.id}"
    for key, task in tasks.items():
        assert task["timeout_seconds"] > 0, key
        if key != "recommend":
            assert task["max_retries"] >= 1 and task["min_retry_interval_millis"] > 0, key
    assert pipeline["schedule"]["pause_status"] == "UNPAUSED"  # prod; dev and staging pause
    assert bundle("dev").jobs["jobrec_pipeline"]["schedule"]["pause_status"] == "PAUSED"
    assert "on_failure" in pipeline["email_notifications"]
    assert pipeline["max_concurrent_runs"] == 1


def test_training_gets_the_gpu_cluster_and_the_spark_stages_the_connector():
    resolved = bundle()
    pipeline = resolved.jobs["jobrec_pipeline"]
    clusters = {c["job_cluster_key"]: c["new_cluster"] for c in pipeline["job_clusters"]}
    assert "gpu" in clusters["gpu"]["spark_version"] and "-ml-" in clusters["gpu"]["spark_version"]
    assert clusters["spark_cpu"]["spark_version"].startswith(("15.4.", "16.4."))  # Spark 3.5
    assert (
        clusters["spark_cpu"]["autoscale"]["max_workers"]
        >= clusters["spark_cpu"]["autoscale"]["min_workers"]
    )
    tasks = {task["task_key"]: task for task in pipeline["tasks"]}
    assert tasks["train_drmm"]["job_cluster_key"] == "gpu"
    assert "training.num_processes=2" in tasks["train_drmm"]["python_wheel_task"]["parameters"]
    version = pom_property("elasticsearch.spark.version")
    connector = f"org.elasticsearch:elasticsearch-spark-30_2.12:{version}"
    for job in resolved.jobs.values():
        for task in job["tasks"]:
            libraries = task.get("libraries", [])
            if "python_wheel_task" in task:
                assert {"whl": "../../dist/*.whl"} in libraries
            if task.get("job_cluster_key") == "spark_cpu":
                assert {"maven": {"coordinates": connector}} in libraries


def test_settings_reach_the_configuration_and_secrets_only_by_scope(entry_points):
    resolved = bundle("staging")
    [ingest] = [t for t in resolved.wheel_tasks() if t.task_key == "ingest"]
    arguments = " ".join(ingest.parameters)
    assert "storage.root=dbfs:/jobrec/staging" in arguments
    assert "mlflow.model_name=jobrec_staging.ml.jobrec_drmm" in arguments
    assert "elasticsearch.auth.secret_scope=jobrec-elasticsearch" in arguments
    text = "\n".join(p.read_text() for p in sorted(DEPLOY.rglob("*.yml")))
    assert not re.search(r"(password|api_key|token)\s*:", text, re.IGNORECASE)
    assert not re.search(r"dapi[0-9a-f]{16,}|https?://[^\s]*@", text)


def test_variables_come_from_the_command_line_the_environment_the_target_or_the_default():
    environ = {"BUNDLE_VAR_data_preset": "demo", "BUNDLE_VAR_catalog": "from_env"}
    resolved = load_bundle(DEPLOY, "dev", {"catalog": "from_cli"}, environ=environ)
    assert resolved.variables["var.catalog"] == "from_cli"
    assert resolved.variables["var.data_preset"] == "demo"
    assert resolved.variables["var.registered_model"] == "from_cli.ml.jobrec_drmm"
    assert resolved.variables["var.schema"] == "ml"  # the default
    with pytest.raises(BundleError, match="storage_root has no value"):
        load_bundle(DEPLOY, "prod", SERVICE_PRINCIPAL, environ={})
    with pytest.raises(BundleError, match="undeclared"):
        load_bundle(DEPLOY, "dev", {"storage_rot": "x"}, environ={})
    with pytest.raises(BundleError, match="unknown target"):
        load_bundle(DEPLOY, "qa", environ={})
    staging = load_bundle(DEPLOY, "staging", environ={})
    assert any("run_as" in problem for problem in check_workflows(staging))


def test_the_checks_catch_what_a_deploy_would_reject(entry_points):
    resolved = bundle()

    def broken(change) -> Bundle:
        settings = copy.deepcopy(resolved.settings)
        change(settings["resources"]["jobs"]["jobrec_pipeline"])
        return dataclasses.replace(resolved, settings=settings)

    def task(job, key):
        return next(t for t in job["tasks"] if t["task_key"] == key)

    typo = broken(lambda job: task(job, "ingest").update(timeout_second=60))
    assert "Unexpected field 'timeout_second'" in " ".join(validate_jobs(typo))
    pause = broken(lambda job: job["schedule"].update(pause_status="PAUSE"))
    assert "PauseStatus" in " ".join(validate_jobs(pause))

    unknown = broken(lambda job: task(job, "evaluate")["depends_on"].append({"task_key": "x"}))
    assert "depends on unknown task x" in " ".join(check_workflows(unknown))
    cycle = broken(lambda job: task(job, "ingest").update(depends_on=[{"task_key": "evaluate"}]))
    assert "cycle" in " ".join(check_workflows(cycle))
    cron = broken(lambda job: job["schedule"].update(quartz_cron_expression="0 2 * * 0"))
    assert "Quartz" in " ".join(check_workflows(cron))

    def arguments(*extra: str):
        return lambda job: task(job, "ingest")["python_wheel_task"]["parameters"].extend(extra)

    script = broken(lambda job: task(job, "ingest")["python_wheel_task"].update(entry_point="x"))
    assert "no entry point 'x'" in " ".join(check_entry_points(script, entry_points, CONF))
    option = broken(arguments("--no-such-option"))
    assert "rejects its arguments" in " ".join(check_entry_points(option, entry_points, CONF))
    setting = broken(arguments("--set", "cleaning.min_jobs=three"))
    assert "invalid configuration" in " ".join(check_entry_points(setting, entry_points, CONF))


def test_the_bundle_command_prints_the_workflows_and_fails_on_problems(capsys):
    assert jobrec(["bundle", "--folder", str(DEPLOY), "-t", "dev"]) == 0
    out = capsys.readouterr().out
    assert "build_pairs [spark_cpu] after clean_candidates, index_jobs" in out
    assert "bundle OK" in out
    assert jobrec(["bundle", "--folder", str(DEPLOY), "-t", "staging"]) == 1
    assert "service_principal" in capsys.readouterr().err
    assert jobrec(["bundle", "--folder", str(DEPLOY), "-t", "prod"]) == 2


def pom_property(name: str) -> str:
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ET.parse(REPO / "jvm" / "pom.xml").getroot().find(f"m:properties/m:{name}", namespace)
    assert found is not None and found.text
    return found.text


def test_the_bundle_names_the_connector_version_of_the_local_build():
    coordinates = load_bundle(DEPLOY, "dev", environ={}).variables["var.es_spark_connector"]
    assert coordinates.rsplit(":", 1)[1] == pom_property("elasticsearch.spark.version")
