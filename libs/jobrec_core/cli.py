"""The `jobrec` command: local services and the one-command demo.

jobrec es start|stop|status     the local Elasticsearch node
jobrec index versions|rollback  the versions of the jobs index; point the alias back
jobrec demo                     start the node, prove every component, print the report
jobrec run --preset seed        every stage on a preset; rerun to resume after a failure
jobrec snapshot --env local --env seed   a preset's report as a section docs/RESULTS.md appends
jobrec recommend --candidate ID a candidate's past jobs and their ten recommendations
jobrec serve                    online recommendations over HTTP (POST /recommend, GET /health)
jobrec config                   print the resolved configuration (secrets are never in it)
jobrec bundle -t prod           resolve and check the Databricks bundle, offline (docs/DEPLOY.md)
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from jobrec_core.config import ConfigError, JobrecConfig, load_config
from jobrec_core.platform.logs import setup_logging
from jobrec_core.runtime import add_common_arguments
from jobrec_core.search.local_node import SERVICE_NAME, LocalElasticsearch, LocalNodeError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobrec", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    es = add_common_arguments(commands.add_parser("es", help="the local Elasticsearch node"))
    es.add_argument("action", choices=["start", "stop", "status"])
    es.add_argument("--purge", action="store_true", help="with stop: delete the node's data")

    index = add_common_arguments(
        commands.add_parser("index", help="versions of the jobs index behind its alias")
    )
    index.add_argument("action", choices=["versions", "rollback"])
    index.add_argument("--to", default=None, help="with rollback: the version (default: previous)")

    demo = add_common_arguments(
        commands.add_parser("demo", help="run the pipeline on the embedded default")
    )
    demo.add_argument(
        "--keep-es", action="store_true", help="leave the Elasticsearch node running afterwards"
    )

    run = add_common_arguments(
        commands.add_parser(
            "run", help="the whole pipeline on a preset; resumes after the last completed step"
        )
    )
    run.add_argument("--preset", default=None, help="data preset (tiny, demo, seed): data.preset")
    run.add_argument(
        "--candidates",
        type=int,
        default=DEMO_CANDIDATES,
        help="held-out candidates to recommend to",
    )
    run.add_argument(
        "--from", dest="start", default=None, metavar="STEP", help="run again from STEP"
    )
    run.add_argument("--fresh", action="store_true", help="forget the state: run every step")
    run.add_argument("--keep-es", action="store_true", help="leave the local node running")

    snapshot = add_common_arguments(
        commands.add_parser(
            "snapshot", help="copy a preset's report and steps into docs as an appended section"
        )
    )
    snapshot.add_argument(
        "--to",
        default="docs/results",
        help="folder of the section (<preset>.md) and its plots (<preset>/); the report that "
        "appends it lives in its parent (default: docs/results)",
    )

    recommend = add_common_arguments(
        commands.add_parser("recommend", help="one candidate's jobs and recommendations")
    )
    recommend.add_argument("--candidate", type=int, required=True, help="the candidate id")
    recommend.add_argument(
        "--refresh", action="store_true", help="recommend again even if the table has them"
    )

    serve = add_common_arguments(
        commands.add_parser("serve", help="online recommendations over HTTP")
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: local only)")
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: any free)")

    data = add_common_arguments(commands.add_parser("data", help="dataset tools"))
    data.add_argument("action", choices=["report"])
    data.add_argument(
        "--out", default=None, help="folder for the plots (default: the dataset's reports/)"
    )

    add_common_arguments(commands.add_parser("config", help="print the resolved configuration"))

    bundle = commands.add_parser(
        "bundle", help="resolve the Databricks bundle for a target and check it, offline"
    )
    bundle.add_argument("-t", "--target", default=None, help="bundle target (default: its default)")
    bundle.add_argument(
        "--var",
        dest="variables",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a bundle variable, as `databricks bundle --var`",
    )
    bundle.add_argument("--folder", default="deploy", help="folder of databricks.yml")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    if args.command == "bundle":
        return _bundle(Path(args.folder), args.target, args.variables)
    # A copy: `args.overrides` stays as typed, for the report's "reproduce with" line.
    overrides = list(args.overrides)
    if getattr(args, "preset", None):
        overrides.append(f"data.preset={args.preset}")
    try:
        config = load_config(args.env, overrides, args.conf_dir)
        if args.command == "es":
            return _es(config, args.action, args.purge)
        if args.command == "index":
            return _index(config, args.action, args.to)
        if args.command == "demo":
            return _demo(config, keep_es=args.keep_es)
        if args.command == "run":
            return _run(config, args)
        if args.command == "snapshot":
            return _snapshot(config, args.env, Path(args.to))
        if args.command == "recommend":
            return _recommend(config, args.candidate, args.refresh)
        if args.command == "serve":
            return _serve(config, args.host, args.port)
        if args.command == "data":
            return _data_report(config, args.out)
        print(json.dumps(config.model_dump(), indent=2))
        return 0
    except (ConfigError, LocalNodeError) as error:
        print(f"jobrec: {error}", file=sys.stderr)
        return 2


def _bundle(folder: Path, target: str | None, variables: list[str]) -> int:
    """Print the workflows of the target, then every problem found; 1 when there is one."""
    from jobrec_core.devtools.bundle import (
        BundleError,
        check_bundle,
        describe,
        installed_entry_points,
        load_bundle,
    )

    try:
        overrides = dict(item.split("=", 1) for item in variables)
        bundle = load_bundle(folder, target, overrides)
    except (BundleError, ValueError) as error:
        print(f"jobrec bundle: {error}", file=sys.stderr)
        return 2
    print(describe(bundle))
    problems = check_bundle(bundle, installed_entry_points(), folder.parent / "conf")
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{len(problems)} problem(s)" if problems else "bundle OK (offline checks)")
    return 1 if problems else 0


def _es(config: JobrecConfig, action: str, purge: bool) -> int:
    node = LocalElasticsearch(config.elasticsearch.local)
    if action == "start":
        state = node.start()
        print(f"Elasticsearch running at {state.url} (pid {state.pid})")
        return 0
    if action == "stop":
        was_running = node.stop(purge=purge)
        print("Elasticsearch stopped" if was_running else "Elasticsearch was not running")
        return 0
    running = node.status()
    if running is None:
        print("Elasticsearch is not running")
        return 3
    print(f"Elasticsearch running at {running.url} (pid {running.pid})")
    return 0


def _index(config: JobrecConfig, action: str, to: str | None) -> int:
    from jobrec_core.search.connection import EsConnectionError, make_client, resolve_connection
    from jobrec_core.search.index_versions import IndexBuildError, list_versions, rollback

    alias = config.elasticsearch.index_alias
    try:
        client = make_client(resolve_connection(config))
        if action == "rollback":
            previous, now = rollback(client, alias, to)
            print(f"alias {alias} -> {now} (was: {', '.join(previous) or 'none'})")
            return 0
        versions = list_versions(client, alias)
    except (EsConnectionError, IndexBuildError) as error:
        print(f"jobrec: {error}", file=sys.stderr)
        return 2
    if not versions:
        print(f"no versions of {alias}: run jobs/index_jobs.py")
        return 3
    stats = client.indices.stats(index=f"{alias}_v*", metric="docs")["indices"]
    for version in versions:
        count = stats.get(version.name, {}).get("primaries", {}).get("docs", {}).get("count", "?")
        state = "complete" if version.complete else "incomplete"
        marker = f"<- {alias}" if version.aliased else ""
        print(f"{version.name:<40} {state:<11} {count:>10} docs  {marker}")
    return 0


def _recommend(config: JobrecConfig, candidate: int, refresh: bool) -> int:
    """Print the candidate's recommendations, computing them first when the table has none
    (with the local Elasticsearch node, started for the purpose if it is not running)."""
    from jobrec_core.pipeline import forget_step
    from jobrec_core.platform.spark import get_spark
    from jobrec_core.serving.stage import recommendations_of, run_recommend, show_candidate

    spark = get_spark(config)
    if refresh or recommendations_of(spark, config, candidate).empty:
        forget_step(config, "recommend")  # its rows are rewritten outside `jobrec run`
        with _local_node(config):
            print(run_recommend(spark, config, [candidate]).format(), file=sys.stderr)
    print(show_candidate(spark, config, candidate))
    return 0


def _serve(config: JobrecConfig, host: str, port: int) -> int:
    """Load the pipeline with Spark, stop Spark, then answer requests until interrupted,
    with the local Elasticsearch node (started for the purpose if it is not running)."""
    from jobrec_core.platform.spark import get_spark
    from jobrec_core.serving.endpoint import serve
    from jobrec_core.serving.stage import online_recommender

    with _local_node(config):
        spark = get_spark(config)
        try:
            recommender = online_recommender(spark, config)
        except (LookupError, RuntimeError) as error:  # the index without job vectors, ...
            print(f"jobrec serve: {error}", file=sys.stderr)
            return 2
        finally:
            spark.stop()  # requests run in pandas: the JVM's memory goes back
        # Ctrl-C and `kill` end `serve_forever` with KeyboardInterrupt, so that a node started
        # here is stopped; Spark's own Ctrl-C handler would fail now that it is stopped.
        for stop in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop, signal.default_int_handler)
        server = serve(recommender, host, port)
        print(
            f"serving {recommender.model} ({config.retrieval.retriever} pool, "
            f"{recommender.index}) at {server.url}: POST /recommend, GET /health",
            file=sys.stderr,
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


@contextmanager
def _local_node(config: JobrecConfig, keep: bool = False) -> Iterator[None]:
    """The local Elasticsearch node for the duration: stopped afterwards if started here,
    unless `keep`."""
    local = config.elasticsearch.local
    node = LocalElasticsearch(local) if local.enabled else None
    started = node is not None and node.status() is None
    if node is not None and started:
        node.start()
    try:
        yield
    finally:
        if node is not None and started and not keep:
            node.stop()


def _data_report(config: JobrecConfig, out: str | None) -> int:
    from jobrec_core.data.report import dataset_report
    from jobrec_core.platform.spark import get_spark

    print(dataset_report(get_spark(config), config, Path(out) if out else None))
    return 0


def _snapshot(config: JobrecConfig, envs: str, folder: Path) -> int:
    """The preset's generated RESULTS.md, its plots and its steps' records, copied to `folder`
    as `<preset>.md` and `<preset>/*.png`: a section the demo's report appends
    (`evaluation.report_appendices`), so a heavy run's figures stay in docs/RESULTS.md while
    the demo regenerates the rest."""
    import shutil

    from jobrec_core import pipeline
    from jobrec_core.results import report_folder, snapshot_section

    preset = config.data.preset
    source = report_folder(config)
    report = source / "RESULTS.md"
    if not report.is_file():
        print(f"jobrec snapshot: no report at {report}: run `jobrec run` on {preset!r} first",
              file=sys.stderr)  # fmt: skip
        return 2
    state = pipeline.load_state(pipeline.state_file(config), pipeline.fingerprint(config))
    plots = folder / preset
    plots.mkdir(parents=True, exist_ok=True)
    for plot in sorted(source.glob("*.png")):
        shutil.copyfile(plot, plots / plot.name)
    section = snapshot_section(
        preset,
        report.read_text(encoding="utf-8"),
        _env_options(envs),
        pipeline.format_records(state.completed),
        f"{folder.name}/{preset}",
    )
    target = folder / f"{preset}.md"
    target.write_text(section, encoding="utf-8")
    print(f"{target} and {plots}/ written from {report}")
    return 0


DEMO_CANDIDATES = 3  # held-out candidates whose recommendations the demo prints


def _demo(config: JobrecConfig, keep_es: bool) -> int:
    """Every stage on the configured preset (conf/local.yaml: demo), after proving every
    component; always from the start (`jobrec run` is the one that resumes, and forgets what
    it recorded for the preset: the demo rewrites every step's outputs)."""
    from jobrec_core.devtools.stack_check import StackContext, format_report, run_checks
    from jobrec_core.pipeline import PipelineError, forget_step, pipeline_steps, run_steps
    from jobrec_core.platform.spark import get_spark

    with _local_node(config, keep=keep_es):
        spark = get_spark(config)
        results = run_checks(StackContext(config, spark))
        print(format_report(results))
        if not all(r.ok for r in results):
            return 1
        try:
            steps = pipeline_steps(spark, config, DEMO_CANDIDATES, "jobrec demo")
            forget_step(config, steps[0].name)
            run_steps(steps, None, None, services=_node_services(config))
        except PipelineError as error:
            print(f"jobrec demo: {error}", file=sys.stderr)
            return 1
        return 0


def _env_options(envs: str) -> str:
    """The overlays as options again: `local,seed` -> `--env local --env seed`."""
    return " ".join(f"--env {env}" for env in envs.split(","))


def _run_command(args: argparse.Namespace) -> str:
    """`jobrec run` as typed, minus the options that only steer the run (`--from`,
    `--fresh`): the line the report prints under "reproduce with"."""
    words = ["jobrec run", _env_options(args.env)]
    words += [f"--set {shlex.quote(override)}" for override in args.overrides]
    if args.preset:
        words.append(f"--preset {args.preset}")
    if args.candidates != DEMO_CANDIDATES:
        words.append(f"--candidates {args.candidates}")
    return " ".join(words)


def _node_services(config: JobrecConfig) -> dict[str, int]:
    """The local Elasticsearch node, whoever started it, as a service beside the pipeline's
    own processes (its CPU apart, its memory left out); none for a remote cluster."""
    local = config.elasticsearch.local
    node = LocalElasticsearch(local).status() if local.enabled else None
    return {SERVICE_NAME: node.pid} if node is not None else {}


def _run(config: JobrecConfig, args: argparse.Namespace) -> int:
    """The pipeline on the configured preset, resuming after the last recorded step."""
    from jobrec_core import pipeline
    from jobrec_core.platform.spark import get_spark

    path, names = pipeline.state_file(config), pipeline.step_names(config)
    if args.start and args.start not in names:
        print(f"jobrec run: no step {args.start!r}; the steps are: {', '.join(names)}",
              file=sys.stderr)  # fmt: skip
        return 2
    key = pipeline.fingerprint(config)
    state = pipeline.PipelineState(key) if args.fresh else pipeline.load_state(path, key)
    if args.start:
        state = pipeline.restart_from(state, names, args.start)
    pipeline.save_state(path, state)
    with _local_node(config, keep=args.keep_es):
        spark = get_spark(config)
        steps = pipeline.pipeline_steps(spark, config, args.candidates, _run_command(args))
        try:
            pipeline.run_steps(
                steps,
                state,
                path,
                services=_node_services(config),
                arguments=pipeline.step_arguments(args.candidates),
            )
        except pipeline.PipelineError as error:
            print(f"\njobrec run: {error}", file=sys.stderr)
            print(f"the state is in {path}; run the same command again to resume from that step",
                  file=sys.stderr)  # fmt: skip
            return 1
    print(f"\n{config.data.preset}: every step done (state: {path})")
    print(pipeline.format_records(state.completed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
