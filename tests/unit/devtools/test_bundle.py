"""The Databricks bundle (deploy/), checked without a workspace: resolved for every target,
each job, experiment and registered model validated against the official `databricks-bundles`
models, each task's entry point found in the wheel that the bundle builds, its arguments parsed
by the job's own parser into a configuration naming the experiment and model the bundle
declares."""

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
    check_ml_artifacts,
    check_workflows,
    load_bundle,
    task_order,
    validate_resources,
)
from tests.helpers import REPO

DEPLOY = REPO / "deploy"
CONF = REPO / "conf"
SERVICE_PRINCIPAL = {"service_principal": "6a1a4b52-0000-4000-8000-000000000000"}
TARGET_VALUES = {
    "dev": {},
    "staging": SERVICE_PRINCIPAL,
    "prod": SERVICE_PRINCIPAL,
}
PIPELINE = [
    "ingest",
    "train_embeddings",
    "train_titles",
    "normalise_titles",
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
    assert len(tasks) == 13
    for task in tasks:
        assert task.package == "jobrec"
        module, function = entry_points[task.entry_point].split(":")
        assert function == "run" and f"{module.replace('.', '/')}.py" in files
        stage = module.removeprefix("jobrec_core.entrypoints.")
        assert task.entry_point == "jobrec-" + stage.replace("_", "-")
        assert (REPO / "jobs" / f"{stage}.py").exists()  # what spark-submit runs locally
        assert task.parameters[:4] == ["--env", "databricks", "--env", "dev"]
    assert "jobrec_core/devtools/bundle.py" in files and "jobrec_core/resources/" in " ".join(files)


def test_the_pipeline_runs_the_stages_in_order_and_then_the_recommendations():
    resolved = bundle("prod")
    pipeline = resolved.jobs["jobrec_pipeline"]
    order = task_order(pipeline)
    assert order is not None and sorted(order) == sorted(PIPELINE)
    parallel = ("train_titles", "clean_candidates", "index_jobs")  # no order between them
    assert [key for key in order if key not in parallel] == [
        key for key in PIPELINE if key not in parallel
    ]
    tasks = {task["task_key"]: task for task in pipeline["tasks"]}
    assert {d["task_key"] for d in tasks["normalise_titles"]["depends_on"]} == {
        "train_embeddings",
        "train_titles",
    }
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
    # Databricks Runtime 16.4 LTS ML: Spark 3.5, the libraries of deploy/runtime/
    assert clusters["spark_cpu"]["spark_version"] == "16.4.x-cpu-ml-scala2.12"
    assert clusters["gpu"]["spark_version"] == "16.4.x-gpu-ml-scala2.12"
    # Petastorm, with the pyarrow it runs with, on the training cluster only (init/training.sh)
    [script] = clusters["gpu"]["init_scripts"]
    assert script["workspace"]["destination"].endswith("/deploy/init/training.sh")
    assert "init_scripts" not in clusters["spark_cpu"]
    installs = (DEPLOY / "init" / "training.sh").read_text()
    assert "--no-deps" in installs and "petastorm==0.13.1" in installs
    assert "pyarrow==14.0.2" in installs
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


def test_targets_differ_by_their_configuration_overlay_and_secrets_only_by_scope():
    for target in ("staging", "prod"):
        resolved = bundle(target)
        for task in resolved.wheel_tasks():
            assert task.parameters[:6] == [
                "--env",
                "databricks",
                "--env",
                target,
                "--job-run-id",
                "{{job.run_id}}",  # Databricks' dynamic value: each run's MLflow runs carry it
            ]
            extra = task.parameters[6:]
            assert extra == (
                ["--set", "training.num_processes=2"] if task.task_key == "train_drmm" else []
            )
    text = "\n".join(p.read_text() for p in sorted(DEPLOY.rglob("*.yml")))
    assert not re.search(r"(password|api_key|token)\s*:", text, re.IGNORECASE)
    assert not re.search(r"dapi[0-9a-f]{16,}|https?://[^\s]*@", text)
    conf = "\n".join(p.read_text() for p in sorted(CONF.glob("*.yaml")))
    assert not re.search(r"(password|api_key|token)\s*:\s*\S", conf, re.IGNORECASE)


def test_each_developer_gets_a_storage_folder_and_the_experiment_and_model_dev_mode_names():
    [ingest] = [t for t in bundle("dev").wheel_tasks() if t.task_key == "ingest"]
    you = "${workspace.current_user.short_name}"
    assert ingest.parameters == [
        "--env",
        "databricks",
        "--env",
        "dev",
        "--job-run-id",
        "{{job.run_id}}",
        "--set",
        f"storage.root=/Volumes/jobrec_dev/ml/jobrec/{you}",
        "--set",
        f"mlflow.experiment=/Users/${{workspace.current_user.userName}}/[dev {you}] jobrec",
        "--set",
        f"mlflow.model_name=jobrec_dev.ml.dev_{you}_jobrec_drmm",
        "--set",
        f"titles.model_name=jobrec_dev.ml.dev_{you}_jobrec_title_normaliser",
    ]


@pytest.mark.parametrize("target", list(TARGET_VALUES))
def test_the_experiment_and_the_registered_models_are_declared_with_grants(target):
    resolved = bundle(target)
    [experiment] = resolved.resources("experiments").values()
    assert {"level": "CAN_READ", "group_name": "users"} in experiment["permissions"]
    models = resolved.resources("registered_models")
    assert set(models) == {"jobrec_drmm", "jobrec_title_normaliser"}
    for key, model in models.items():
        assert model["catalog_name"] == f"jobrec_{target}" and model["schema_name"] == "ml"
        assert {"principal": "account users", "privileges": ["EXECUTE"]} in model["grants"]
        assert {
            "principal": "${workspace.current_user.userName}",
            "privileges": ["ALL_PRIVILEGES"],
        } in model["grants"]
        if target != "dev":  # production mode keeps the names; development mode prefixes them
            assert model["name"] == key
    if target != "dev":
        assert experiment["name"] == f"/Shared/jobrec-{target}"


def test_the_jobs_must_use_the_declared_experiment_and_model(entry_points, tmp_path):
    for source in CONF.glob("*.yaml"):
        (tmp_path / source.name).write_text(source.read_text())
    prod = (tmp_path / "prod.yaml").read_text()
    (tmp_path / "prod.yaml").write_text(prod.replace("jobrec_prod.ml.", "jobrec_prd.ml."))
    problems = " ".join(check_ml_artifacts(bundle("prod"), entry_points, tmp_path))
    assert "mlflow.model_name 'jobrec_prd.ml.jobrec_drmm' is not a registered model" in problems
    assert "jobrec_prod.ml.jobrec_drmm" in problems
    assert "titles.model_name 'jobrec_prd.ml.jobrec_title_normaliser' is not a" in problems


def test_a_remote_storage_root_is_refused_before_any_deploy(entry_points):
    resolved = bundle("prod")
    settings = copy.deepcopy(resolved.settings)
    [ingest] = [
        t
        for t in settings["resources"]["jobs"]["jobrec_pipeline"]["tasks"]
        if t["task_key"] == "ingest"
    ]
    ingest["python_wheel_task"]["parameters"] += [
        "--set",
        "storage.root=abfss://jobrec@example.dfs.core.windows.net/prod",
    ]
    remote = dataclasses.replace(resolved, settings=settings)
    assert "storage.root: a remote URL" in " ".join(check_entry_points(remote, entry_points, CONF))


def test_variables_come_from_the_command_line_the_environment_the_target_or_the_default(
    tmp_path,
):
    environ = {"BUNDLE_VAR_schedule": "0 0 3 ? * MON", "BUNDLE_VAR_catalog": "from_env"}
    resolved = load_bundle(DEPLOY, "staging", {"catalog": "from_cli"}, environ=environ)
    assert resolved.variables["var.catalog"] == "from_cli"
    assert resolved.variables["var.schedule"] == "0 0 3 ? * MON"
    assert resolved.variables["var.experiment_name"] == "/Shared/jobrec-staging"  # the target
    assert resolved.variables["var.schema"] == "ml"  # the default
    models = resolved.resources("registered_models").values()
    assert {model["catalog_name"] for model in models} == {"from_cli"}
    with pytest.raises(BundleError, match="undeclared"):
        load_bundle(DEPLOY, "dev", {"storage_root": "x"}, environ={})
    with pytest.raises(BundleError, match="unknown target"):
        load_bundle(DEPLOY, "qa", environ={})
    staging = load_bundle(DEPLOY, "staging", environ={})
    assert any("run_as" in problem for problem in check_workflows(staging))
    (tmp_path / "databricks.yml").write_text(
        "bundle: {name: b}\nvariables: {catalog: {}}\ntargets: {dev: {default: true}}\n"
    )
    with pytest.raises(BundleError, match="catalog has no value"):
        load_bundle(tmp_path, environ={})


def test_the_checks_catch_what_a_deploy_would_reject(entry_points):
    resolved = bundle()

    def broken(change) -> Bundle:
        settings = copy.deepcopy(resolved.settings)
        change(settings["resources"]["jobs"]["jobrec_pipeline"])
        return dataclasses.replace(resolved, settings=settings)

    def task(job, key):
        return next(t for t in job["tasks"] if t["task_key"] == key)

    typo = broken(lambda job: task(job, "ingest").update(timeout_second=60))
    assert "Unexpected field 'timeout_second'" in " ".join(validate_resources(typo))
    pause = broken(lambda job: job["schedule"].update(pause_status="PAUSE"))
    assert "PauseStatus" in " ".join(validate_resources(pause))
    grant = copy.deepcopy(resolved.settings)
    grant["resources"]["registered_models"]["jobrec_drmm"]["grants"][0]["privileges"] = ["RUN"]
    assert "'RUN' is not a valid Privilege" in " ".join(
        validate_resources(dataclasses.replace(resolved, settings=grant))
    )
    reference = broken(
        lambda job: task(job, "recommend")["run_job_task"].update(
            job_id="${resources.jobs.jobrec_recomend.id}"
        )
    )
    assert "undeclared resource" in " ".join(check_workflows(reference))

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
    principal = f"service_principal={SERVICE_PRINCIPAL['service_principal']}"
    assert jobrec(["bundle", "--folder", str(DEPLOY), "-t", "prod", "--var", principal]) == 0
    out = capsys.readouterr().out
    assert "registered model jobrec_drmm: jobrec_prod.ml.jobrec_drmm (EXECUTE to account" in out
    assert jobrec(["bundle", "--folder", str(DEPLOY), "-t", "staging"]) == 1
    assert "service_principal" in capsys.readouterr().err
    assert jobrec(["bundle", "--folder", str(DEPLOY), "-t", "prod", "--var", "nope=1"]) == 2


def pom_property(name: str) -> str:
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ET.parse(REPO / "jvm" / "pom.xml").getroot().find(f"m:properties/m:{name}", namespace)
    assert found is not None and found.text
    return found.text


def test_the_bundle_names_the_connector_version_of_the_local_build():
    coordinates = load_bundle(DEPLOY, "dev", environ={}).variables["var.es_spark_connector"]
    assert coordinates.rsplit(":", 1)[1] == pom_property("elasticsearch.spark.version")
