"""The Databricks Asset Bundle (`deploy/`), read and checked without a workspace.

`databricks bundle validate` needs a workspace and its credentials. Most mistakes in a bundle
do not: a misspelt field, a task depending on a task that does not exist, a variable with no
value in prod, an entry point missing from the wheel, arguments its job would reject, a job
writing to another model than the one the bundle grants access to. This module resolves the
bundle the way the CLI does (includes, the target's overrides, variables, the names
development mode gives, `${resources...}` references to fields the bundle sets) and checks it:

- every job, experiment and registered model against the official models of
  `databricks-bundles` (strict: an unknown field, a wrong type or privilege is an error);
- the workflow graph: task keys, dependencies, clusters, references between resources;
- every wheel task: its console script exists and its arguments parse with the job's own
  parser into a valid configuration, which names the experiment and the registered model
  the bundle declares.

What only a workspace can tell (node types, runtime versions, permissions, secret scopes) is
left to `databricks bundle validate` (docs/DEPLOY.md).
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobrec_core.config import ConfigError, JobrecConfig, deep_merge
from jobrec_core.runtime import config_from_args

BUNDLE_FILE = "databricks.yml"
ENV_VARIABLE_PREFIX = "BUNDLE_VAR_"
# References the CLI resolves at deploy time from the workspace or the deployed resources.
DEPLOY_TIME_PREFIXES = ("bundle.", "workspace.", "resources.")
REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.\-\[\]]+)\}")
VARIABLE_PREFIX = "var."
RESOURCE_PREFIX = "resources."
# The names development mode gives (the CLI's ApplyPresets): "[dev <you>] " before the name of a
# job or an experiment (its last path segment), "dev_<you>_" before a Unity Catalog name.
DEVELOPMENT = "development"
DEV_PREFIX = "[dev ${workspace.current_user.short_name}] "
DEV_UC_PREFIX = "dev_${workspace.current_user.short_name}_"
# The variable holding the arguments every task passes (shown once by `describe`).
JOB_ARGUMENTS = "job_arguments"
JOB_ARGUMENTS_SHOWN = "<job arguments>"


class BundleError(ValueError):
    """The bundle cannot be resolved: a file, a target or a variable value is missing."""


@dataclass(frozen=True)
class WheelTask:
    """A task that runs a console script of the project's wheel."""

    job: str
    task_key: str
    package: str
    entry_point: str
    parameters: list[str]


@dataclass(frozen=True)
class Bundle:
    """The bundle for one target, variables substituted, as the CLI would deploy it (minus the
    references only a workspace can resolve: `${workspace.*}`, `${resources.*}`)."""

    folder: Path
    target: str
    mode: str | None
    variables: dict[str, Any]
    settings: dict[str, Any]

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        return self.resources("jobs")

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """The resources of one kind (`jobs`, `experiments`, `registered_models`), by key."""
        return dict(self.settings.get("resources", {}).get(kind, {}))

    def wheel_tasks(self) -> Iterator[WheelTask]:
        for job, spec in self.jobs.items():
            for task in spec.get("tasks", []):
                wheel = task.get("python_wheel_task")
                if wheel:
                    yield WheelTask(
                        job=job,
                        task_key=task["task_key"],
                        package=wheel["package_name"],
                        entry_point=wheel.get("entry_point", ""),
                        parameters=[str(p) for p in wheel.get("parameters", [])],
                    )


def load_bundle(
    folder: Path | str,
    target: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Bundle:
    """Resolve `folder/databricks.yml` for `target` (default: the target marked default).

    Variable values, strongest first: `overrides` (the CLI's `--var`), `BUNDLE_VAR_<name>` in
    `environ`, the target's `variables`, the variable's `default`."""
    folder = Path(folder)
    settings = _read(folder / BUNDLE_FILE)
    for pattern in settings.pop("include", []):
        matches = sorted(folder.glob(pattern))
        if not matches:
            raise BundleError(f"include {pattern!r} matches no file in {folder}")
        for path in matches:
            _merge_included(settings, _read(path), path)
    targets = settings.pop("targets", {}) or {}
    name = target or next((t for t, spec in targets.items() if (spec or {}).get("default")), None)
    if name is None or name not in targets:
        known = ", ".join(targets) or "none"
        raise BundleError(f"unknown target {name!r} (targets: {known})")
    overlay = copy.deepcopy(targets[name] or {})
    target_values = overlay.pop("variables", {}) or {}
    for key, value in overlay.items():
        # Mappings merge; a list in a target replaces the list (the CLI merges a job's tasks
        # and clusters by key, which this bundle's targets do not need).
        if key not in ("default", "mode"):
            deep_merge(settings, {key: value})
    declared = settings.pop("variables", {}) or {}
    about = {"bundle.target": name, "bundle.name": settings["bundle"]["name"]}
    values = _variable_values(
        declared,
        target_values,
        dict(overrides or {}),
        os.environ if environ is None else environ,
        about,
    )
    substitutions = {**values, **about}
    mode = overlay.get("mode")
    resolved = _substitute(settings, substitutions)
    if mode == DEVELOPMENT:
        _development_names(resolved.get("resources", {}))
    fields = _resource_fields(resolved.get("resources", {}))
    return Bundle(
        folder=folder,
        target=name,
        mode=mode,
        variables=_substitute(values, fields),
        settings=_substitute(resolved, fields),
    )


def validate_resources(bundle: Bundle) -> list[str]:
    """Every job, experiment and registered model against its official model in
    `databricks-bundles`; the problems found (a kind it has no model for is one)."""
    from databricks.bundles.experiments import MlflowExperiment
    from databricks.bundles.jobs import Job
    from databricks.bundles.registered_models import RegisteredModel

    models: dict[str, Any] = {
        "jobs": Job,
        "experiments": MlflowExperiment,
        "registered_models": RegisteredModel,
    }
    problems = []
    for kind, resources in bundle.settings.get("resources", {}).items():
        model = models.get(kind)
        if model is None:
            problems.append(f"resources.{kind}: not a kind this check knows ({', '.join(models)})")
            continue
        for name, spec in resources.items():
            try:
                model.from_dict(copy.deepcopy(spec))
            except (ValueError, TypeError, KeyError) as error:
                problems.append(f"resources.{kind}.{name}: {error}")
    return problems


def check_workflows(bundle: Bundle) -> list[str]:
    """What the schema cannot see: the task graph, clusters, references, leftovers."""
    problems = []
    for name, spec in bundle.jobs.items():
        where = f"resources.jobs.{name}"
        tasks = spec.get("tasks", [])
        keys = [task["task_key"] for task in tasks]
        problems += [f"{where}: task {key} is defined twice" for key in _repeated(keys)]
        clusters = {c["job_cluster_key"] for c in spec.get("job_clusters", [])}
        for task in tasks:
            for dependency in task.get("depends_on", []):
                if dependency["task_key"] not in keys:
                    problems.append(
                        f"{where}.{task['task_key']}: depends on unknown task "
                        f"{dependency['task_key']}"
                    )
            cluster = task.get("job_cluster_key")
            if cluster is not None and cluster not in clusters:
                problems.append(f"{where}.{task['task_key']}: no job cluster {cluster!r}")
            if "run_job_task" not in task and cluster is None:
                problems.append(f"{where}.{task['task_key']}: no job cluster")
        schedule = spec.get("schedule")
        if schedule and len(schedule["quartz_cron_expression"].split()) not in (6, 7):
            problems.append(f"{where}: the schedule is not a Quartz cron expression (6-7 fields)")
        if not problems and task_order(spec) is None:
            problems.append(f"{where}: the task dependencies form a cycle")
    for reference in _references(bundle.settings):
        if reference.startswith(VARIABLE_PREFIX):
            problems.append(f"unresolved variable ${{{reference}}}")
        elif not reference.startswith(DEPLOY_TIME_PREFIXES):
            problems.append(f"unknown reference ${{{reference}}}")
        elif reference.startswith(RESOURCE_PREFIX):
            _, kind, key, *_ = [*reference.split("."), "", ""]
            if key not in bundle.resources(kind):
                problems.append(f"reference to an undeclared resource ${{{reference}}}")
    if bundle.mode == "production":
        run_as = bundle.settings.get("run_as", {})
        if not any(str(value).strip() for value in run_as.values()):
            problems.append(
                f"target {bundle.target}: production jobs need run_as "
                "(pass --var service_principal=<application id>)"
            )
    return problems


def check_entry_points(
    bundle: Bundle, entry_points: Mapping[str, str], conf_dir: Path
) -> list[str]:
    """Every wheel task's console script exists (`entry_points`: name -> `module:function`, as
    in the wheel's metadata) and its arguments parse with that job's own `build_parser()` into a
    valid configuration (read from `conf_dir`, the folder the bundle syncs)."""
    return [
        f"resources.jobs.{task.job}.{task.task_key}: {outcome}"
        for task, outcome in _task_configs(bundle, entry_points, conf_dir)
        if isinstance(outcome, str)
    ]


def check_ml_artifacts(
    bundle: Bundle, entry_points: Mapping[str, str], conf_dir: Path
) -> list[str]:
    """Every wheel task's configuration names the experiment and the registered models that the
    bundle declares (so with the permissions and grants declared there): two files hold those
    names, the bundle for the deploy and conf/<target>.yaml for the jobs and notebooks."""
    experiments = {spec.get("name") for spec in bundle.resources("experiments").values()}
    models = {
        ".".join(str(spec.get(part)) for part in ("catalog_name", "schema_name", "name"))
        for spec in bundle.resources("registered_models").values()
    }
    problems = []
    for task, outcome in _task_configs(bundle, entry_points, conf_dir):
        if isinstance(outcome, str):
            continue  # check_entry_points reports it
        where = f"resources.jobs.{task.job}.{task.task_key}"
        if outcome.mlflow.experiment not in experiments:
            problems.append(
                f"{where}: mlflow.experiment {outcome.mlflow.experiment!r} is not an experiment "
                f"of the bundle ({', '.join(sorted(map(str, experiments))) or 'none'})"
            )
        for setting, name in (
            ("mlflow.model_name", outcome.mlflow.model_name),
            ("titles.model_name", outcome.titles.model_name),
        ):
            if name not in models:
                problems.append(
                    f"{where}: {setting} {name!r} is not a registered model of the bundle "
                    f"({', '.join(sorted(models)) or 'none'})"
                )
    return problems


def check_bundle(bundle: Bundle, entry_points: Mapping[str, str], conf_dir: Path) -> list[str]:
    """All the checks: the official resource models, the workflows, the entry points, the
    experiment and the model the jobs use."""
    return (
        validate_resources(bundle)
        + check_workflows(bundle)
        + check_entry_points(bundle, entry_points, conf_dir)
        + check_ml_artifacts(bundle, entry_points, conf_dir)
    )


def _task_configs(
    bundle: Bundle, entry_points: Mapping[str, str], conf_dir: Path
) -> Iterator[tuple[WheelTask, JobrecConfig | str]]:
    """Each wheel task with the configuration its arguments give, or why there is none."""
    for task in bundle.wheel_tasks():
        target = entry_points.get(task.entry_point)
        if target is None:
            yield task, f"the wheel has no entry point {task.entry_point!r}"
            continue
        module = importlib.import_module(target.split(":")[0])
        try:
            args = module.build_parser().parse_args(task.parameters)
        except SystemExit:
            yield task, f"{target} rejects its arguments {task.parameters}"
            continue
        args.conf_dir = str(conf_dir)
        try:
            yield task, config_from_args(args)
        except ConfigError as error:
            yield task, f"invalid configuration: {error}"


def installed_entry_points(distribution: str = "jobrec") -> dict[str, str]:
    """The console scripts of the installed `distribution` (what its wheel declares)."""
    return {
        point.name: point.value
        for point in importlib.metadata.distribution(distribution).entry_points
        if point.group == "console_scripts"
    }


def task_order(job: Mapping[str, Any]) -> list[str] | None:
    """The task keys in an order that respects `depends_on` (None when there is a cycle)."""
    waiting = {
        task["task_key"]: {d["task_key"] for d in task.get("depends_on", [])}
        for task in job.get("tasks", [])
    }
    order: list[str] = []
    while waiting:
        ready = [key for key, needs in waiting.items() if needs <= set(order)]
        if not ready:
            return None
        order += ready
        for key in ready:
            del waiting[key]
    return order


def describe(bundle: Bundle) -> str:
    """Each job's schedule and tasks in order, with the cluster and command of each."""
    common = list(bundle.variables.get(f"{VARIABLE_PREFIX}{JOB_ARGUMENTS}") or [])
    lines = [f"bundle {bundle.settings['bundle']['name']}, target {bundle.target}"]
    if common:
        lines.append(f"{JOB_ARGUMENTS_SHOWN}: {' '.join(common)}")
    for key, spec in bundle.resources("experiments").items():
        lines.append(f"experiment {key}: {spec.get('name')}")
    for key, spec in bundle.resources("registered_models").items():
        grants = "; ".join(
            f"{', '.join(grant.get('privileges', []))} to {grant.get('principal')}"
            for grant in spec.get("grants", [])
        )
        full_name = ".".join(str(spec.get(p)) for p in ("catalog_name", "schema_name", "name"))
        lines.append(f"registered model {key}: {full_name}" + (f" ({grants})" if grants else ""))
    for name, spec in bundle.jobs.items():
        schedule = spec.get("schedule")
        when = (
            f"cron {schedule['quartz_cron_expression']} {schedule.get('timezone_id', '')}, "
            f"{schedule.get('pause_status', 'UNPAUSED')}"
            if schedule
            else "on demand"
        )
        lines.append(f"{name} ({spec.get('name', name)}): {when}")
        tasks = {task["task_key"]: task for task in spec.get("tasks", [])}
        for key in task_order(spec) or list(tasks):
            task = tasks[key]
            after = ", ".join(d["task_key"] for d in task.get("depends_on", []))
            if "python_wheel_task" in task:
                wheel = task["python_wheel_task"]
                arguments = list(wheel.get("parameters", []))
                if arguments[: len(common)] == common:
                    arguments = [JOB_ARGUMENTS_SHOWN, *arguments[len(common) :]]
                command = " ".join([wheel.get("entry_point", ""), *arguments])
            else:
                command = " ".join(f"{k}" for k in task if k.endswith("_task"))
            lines.append(
                f"  {key} [{task.get('job_cluster_key', '-')}]"
                + (f" after {after}" if after else "")
                + f": {command}"
            )
    return "\n".join(lines)


def _development_names(resources: dict[str, Any]) -> None:
    """The names development mode deploys under, in place: each developer's copy of a job,
    an experiment and a registered model (the CLI's ApplyPresets, for the kinds this bundle
    declares)."""
    for spec in resources.get("jobs", {}).values():
        spec["name"] = DEV_PREFIX + spec.get("name", "")
    for spec in resources.get("experiments", {}).values():
        folder, slash, base = str(spec["name"]).rpartition("/")
        spec["name"] = f"{folder}{slash}{DEV_PREFIX}{base}"
    for spec in resources.get("registered_models", {}).values():
        spec["name"] = DEV_UC_PREFIX + spec["name"]


def _resource_fields(resources: Mapping[str, Any]) -> dict[str, Any]:
    """`resources.<kind>.<key>.<field>` for every field the bundle sets to a plain value: the CLI
    resolves such references before it deploys; the others (an `id`) only a deploy knows."""
    return {
        f"{RESOURCE_PREFIX}{kind}.{key}.{field}": value
        for kind, specs in resources.items()
        for key, spec in specs.items()
        for field, value in spec.items()
        if isinstance(value, str | int | float | bool)
    }


def _read(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise BundleError(f"cannot read {path}: {error}") from None
    if not isinstance(loaded, dict):
        raise BundleError(f"{path} is not a mapping")
    return loaded


def _merge_included(settings: dict[str, Any], included: dict[str, Any], path: Path) -> None:
    """An included file adds resources (a name defined twice is an error, as in the CLI),
    variables and targets."""
    for kind, resources in (included.pop("resources", {}) or {}).items():
        known = settings.setdefault("resources", {}).setdefault(kind, {})
        for name, spec in resources.items():
            if name in known:
                raise BundleError(f"{path}: resources.{kind}.{name} is defined twice")
            known[name] = spec
    for key, value in included.items():
        deep_merge(settings, {key: value})


def _variable_values(
    declared: Mapping[str, Any],
    target_values: Mapping[str, Any],
    overrides: Mapping[str, Any],
    environ: Mapping[str, str],
    known: Mapping[str, Any],
) -> dict[str, Any]:
    unknown = (set(target_values) | set(overrides)) - set(declared)
    if unknown:
        raise BundleError(f"values for undeclared variables: {', '.join(sorted(unknown))}")
    raw: dict[str, Any] = {}
    for name, spec in declared.items():
        spec = spec or {}
        if name in overrides:
            raw[name] = overrides[name]
        elif ENV_VARIABLE_PREFIX + name in environ:
            raw[name] = environ[ENV_VARIABLE_PREFIX + name]
        elif name in target_values:
            raw[name] = target_values[name]
        elif "default" in spec:
            raw[name] = spec["default"]
        else:
            raise BundleError(f"variable {name} has no value: pass --var {name}=...")
        if isinstance(raw[name], dict | list) and spec.get("type") != "complex":
            raise BundleError(f"variable {name} has a complex value but no `type: complex`")
    resolved: dict[str, Any] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> Any:
        if name in chain:
            raise BundleError(f"variables refer to each other: {' -> '.join((*chain, name))}")
        if name not in resolved:
            if name not in raw:
                raise BundleError(f"unknown variable ${{var.{name}}}")
            resolved[name] = _substitute(raw[name], known, lambda ref: resolve(ref, (*chain, name)))
        return resolved[name]

    for name in raw:
        resolve(name, ())
    return {f"{VARIABLE_PREFIX}{name}": value for name, value in resolved.items()}


def _substitute(value: Any, known: Mapping[str, Any], variable: Any = None) -> Any:
    """`${var.x}` (and the other `known` references) replaced: a whole-string reference keeps
    the value's type (complex variables), one inside a string is formatted into it."""

    def lookup(reference: str) -> Any:
        if reference in known:
            return known[reference]
        if variable is not None and reference.startswith(VARIABLE_PREFIX):
            return variable(reference[len(VARIABLE_PREFIX) :])
        if reference.startswith(VARIABLE_PREFIX):
            raise BundleError(f"unknown variable ${{{reference}}}")
        return None

    if isinstance(value, dict):
        return {key: _substitute(item, known, variable) for key, item in value.items()}
    if isinstance(value, list):
        return [_substitute(item, known, variable) for item in value]
    if not isinstance(value, str):
        return value
    whole = REFERENCE.fullmatch(value)
    if whole:
        found = lookup(whole.group(1))
        return value if found is None else found

    def inline(match: re.Match[str]) -> str:
        found = lookup(match.group(1))
        if found is None:
            return match.group(0)
        if isinstance(found, dict | list):
            raise BundleError(f"complex variable {match.group(0)} used inside {value!r}")
        return str(found)

    return REFERENCE.sub(inline, value)


def _references(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)
    elif isinstance(value, str):
        yield from REFERENCE.findall(value)


def _repeated(keys: list[str]) -> set[str]:
    return {key for key in keys if keys.count(key) > 1}
