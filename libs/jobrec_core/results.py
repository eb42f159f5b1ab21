"""The evaluation report as files and as an MLflow run: `RESULTS.md`, its plots, the tables.

`jobs/evaluate.py --report-dir docs` regenerates `docs/RESULTS.md` and its PNGs; every run also
logs the same tables (MLflow tables), plots and metrics to an `evaluate` run.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from jobrec_core.config import JobrecConfig
from jobrec_core.evaluation.curve import PAPER_CURVE
from jobrec_core.evaluation.ground_truth import GroundTruthRow
from jobrec_core.evaluation.held_out import HeldOutRow
from jobrec_core.evaluation.protocols import BM25
from jobrec_core.evaluation.report import EvaluationReport
from jobrec_core.evaluation.temporal import ALL_LIVE, TemporalEvaluation
from jobrec_core.platform import manifest
from jobrec_core.platform.paths import local_path
from jobrec_core.platform.plots import chart
from jobrec_core.platform.tables import table_path
from jobrec_core.ranking.scorers import score_column_of

log = logging.getLogger(__name__)

CURVE_PLOT = "learning_curve_sizes.png"
GROUND_TRUTH_PLOT = "ground_truth.png"


def tables(report: EvaluationReport) -> dict[str, pd.DataFrame]:
    frames = {
        "protocol": pd.DataFrame([vars(r) for r in report.protocol]),
        "learning_curve": pd.DataFrame([vars(p) for p in report.curve]),
        "ground_truth": pd.DataFrame([_flat_row(g) for g in report.ground_truth]),
        "held_out": pd.DataFrame([_flat_row(h) for h in report.held_out]),
        "ground_truth_vs_baseline": pd.DataFrame(
            [
                {"ranker": c.ranker, "baseline": c.baseline}
                | {f"p_at_k_{k}": v for k, v in asdict(c.precision).items()}
                | {"p_at_k_p_holm": c.precision_p}
                | {f"ndcg_{k}": v for k, v in asdict(c.ndcg).items()}
                | {"ndcg_p_holm": c.ndcg_p}
                for c in report.versus_baseline
            ]
        ),
    }
    return {name: frame for name, frame in frames.items() if not frame.empty}


def _flat_row(row: GroundTruthRow | HeldOutRow) -> dict[str, Any]:
    """A ground-truth row as flat columns: the paired difference as `vs_bm25_<field>`."""
    values = {name: value for name, value in vars(row).items() if name != "versus_reference"}
    if row.versus_reference is not None:
        values |= {f"vs_bm25_{k}": v for k, v in asdict(row.versus_reference).items()}
    return values


def metrics(report: EvaluationReport) -> dict[str, float]:
    """Flat MLflow metric names: `protocol.drmm_v1.map`, `ground_truth.bm25.p_at_10`, ..."""
    values: dict[str, float] = {}
    for row in report.protocol:
        key = _key(row.ranker)
        values[f"protocol.{key}.diversity"] = row.diversity
        if row.map is not None:
            values[f"protocol.{key}.map"] = row.map
        if row.accuracy is not None:
            values[f"protocol.{key}.accuracy"] = row.accuracy
    for gt in report.ground_truth:
        key = _key(gt.ranker)
        values[f"ground_truth.{key}.p_at_{report.k}"] = gt.precision
        values[f"ground_truth.{key}.ndcg_at_{report.k}"] = gt.ndcg
        values[f"ground_truth.{key}.diversity"] = gt.diversity
        values[f"ground_truth.{key}.p_at_{report.k}_low"] = gt.precision_low
        values[f"ground_truth.{key}.p_at_{report.k}_high"] = gt.precision_high
        if gt.versus_reference is not None:
            values[f"ground_truth.{key}.vs_bm25.p_at_{report.k}"] = gt.versus_reference.mean
            values[f"ground_truth.{key}.vs_bm25.p_holm"] = gt.p_holm
    if report.ceiling is not None:
        values[f"ground_truth.ceiling.p_at_{report.k}"] = report.ceiling.mean
    for c in report.versus_baseline:
        key = f"ground_truth.{_key(c.ranker)}.vs_{_key(c.baseline).replace('-', '_')}"
        values[f"{key}.p_at_{report.k}"] = c.precision.mean
        values[f"{key}.p_at_{report.k}_low"] = c.precision.low
        values[f"{key}.ndcg_at_{report.k}"] = c.ndcg.mean
        values[f"{key}.ndcg_at_{report.k}_low"] = c.ndcg.low
    for held in report.held_out:
        key = _key(held.ranker)
        values[f"held_out.{key}.mrr"] = held.mrr
        values[f"held_out.{key}.log_rank"] = held.log_rank
        values[f"held_out.{key}.recall_at_{report.k}"] = held.recall
        values[f"held_out.{key}.ndcg_at_{report.k}"] = held.ndcg
    if report.agreement is not None:
        values["held_out.agreement.spearman"] = report.agreement.spearman
        values["held_out.agreement.kendall"] = report.agreement.kendall
    if report.retrievers is not None:
        for pool in report.retrievers.pools:
            values[f"retrievers.{pool.retriever}.recall"] = pool.recall.mean
            values[f"retrievers.{pool.retriever}.ceiling_p_at_{report.k}"] = pool.ceiling.mean
        for pipeline in report.retrievers.pipelines:
            key = f"retrievers.{score_column_of(pipeline.name).removeprefix('score_')}"
            values[f"{key}.p_at_{report.k}"] = pipeline.precision.mean
            values[f"{key}.ndcg_at_{report.k}"] = pipeline.ndcg.mean
    if report.temporal is not None:
        for setting in report.temporal.settings:
            prefix = f"temporal.{_key(setting.name)}"
            for judged in setting.rows:
                key = f"{prefix}.{score_column_of(judged.ranker).removeprefix('score_')}"
                values[f"{key}.p_at_{report.k}"] = judged.precision.mean
                values[f"{key}.ndcg_at_{report.k}"] = judged.ndcg.mean
                values[f"{key}.future_recall_at_{report.k}"] = judged.future_recall.mean
                values[f"{key}.fresh_share"] = judged.fresh_share
                if judged.versus_bm25 is not None:
                    values[f"{key}.vs_bm25.p_at_{report.k}"] = judged.versus_bm25.mean
                    values[f"{key}.vs_bm25.p_at_{report.k}_low"] = judged.versus_bm25.low
            values[f"{prefix}.relevant_fresh_share"] = setting.relevant_fresh_share
            for versus in setting.versus_baselines:
                key = f"{prefix}.champion.vs_{_key(versus.baseline).replace('-', '_')}"
                values[f"{key}.p_at_{report.k}"] = versus.precision.mean
                values[f"{key}.p_at_{report.k}_low"] = versus.precision.low
    return values


def _key(ranker: str) -> str:
    return ranker.lower().replace(" ", "_")


def curve_figure(report: EvaluationReport) -> Any:
    with chart((6, 4), "DRMM learning curve", (0.0, 1.0)) as (figure, axis):
        # Both curves against the share of their largest sample: the demo has fewer triples.
        largest = max(p.candidates for p in report.curve)
        shares = [p.candidates / largest for p in report.curve]
        for label, values in (
            ("dev accuracy", [p.dev_accuracy for p in report.curve]),
            ("dev MAP", [p.dev_map for p in report.curve]),
        ):
            if None not in values:  # none for a model that reads BM25
                axis.plot(shares, values, marker="o", label=label)
        axis.plot(shares, [p.dev_mrr for p in report.curve], marker="o", label="dev held-out MRR")
        axis.plot(
            shares, [p.precision for p in report.curve], marker="o", label="ground-truth P@10"
        )
        paper_sizes = sorted(PAPER_CURVE)
        paper_shares = [s / paper_sizes[-1] for s in paper_sizes]
        axis.plot(
            paper_shares, [PAPER_CURVE[s][0] for s in paper_sizes], "--", label="paper accuracy"
        )
        axis.plot(paper_shares, [PAPER_CURVE[s][1] for s in paper_sizes], "--", label="paper MAP")
        axis.set_xlabel(
            f"share of the largest sample (ours {largest:,}, paper's {paper_sizes[-1]:,})"
        )
    return figure


def ground_truth_figure(report: EvaluationReport) -> Any:
    title = "Top 10 of BM25's 100, judged against latent interests"
    with chart((7, 4), title, (0, 1), grid="y") as (figure, axis):
        names = [g.ranker for g in report.ground_truth]
        positions = range(len(names))
        rows = report.ground_truth
        for offset, values, lows, highs, label in (
            (
                -0.2,
                [g.precision for g in rows],
                [g.precision_low for g in rows],
                [g.precision_high for g in rows],
                f"P@{report.k}",
            ),
            (
                0.2,
                [g.ndcg for g in rows],
                [g.ndcg_low for g in rows],
                [g.ndcg_high for g in rows],
                f"nDCG@{report.k}",
            ),
        ):
            errors = [
                [v - low for v, low in zip(values, lows, strict=True)],
                [high - v for v, high in zip(values, highs, strict=True)],
            ]
            axis.bar([p + offset for p in positions], values, 0.4, yerr=errors, label=label)
        axis.set_xticks(list(positions), names)
    return figure


def markdown(
    report: EvaluationReport,
    command: str,
    context: dict[str, str],
    appendices: Sequence[str] = (),
) -> str:
    """The report; `appendices` (committed markdown sections) follow it verbatim."""
    lines = [
        "# Results",
        "",
        "Generated by `jobs/evaluate.py`; reproduce with:",
        "",
        "```",
        command,
        "```",
        "",
        ", ".join(f"{key}: `{value}`" for key, value in context.items()),
        "",
        "Models (registry versions): "
        + (", ".join(f"{r} = version {v}" for r, v in report.models.items()) or "none"),
        "",
        "```",
        report.format(),
        "```",
        "",
    ]
    lines += findings(report)
    if report.curve:
        lines += [f"![learning curve]({CURVE_PLOT})", ""]
    if report.ground_truth:
        lines += [f"![ground truth]({GROUND_TRUTH_PLOT})", ""]
    for section in appendices:
        lines += [section.rstrip("\n"), ""]
    return "\n".join(lines)


def read_appendices(paths: Sequence[str]) -> list[str]:
    """The sections `evaluation.report_appendices` names; one that is missing is logged and
    left out (a checkout without docs/, a cluster), never a failed evaluation."""
    found = []
    for name in paths:
        path = Path(name)
        if path.is_file():
            found.append(path.read_text(encoding="utf-8"))
        else:
            log.warning("report appendix %s not found (from %s): left out", name, Path.cwd())
    return found


def snapshot_section(
    preset: str, report_text: str, env_flags: str, steps: str, plots_folder: str
) -> str:
    """A preset's generated RESULTS.md as a section for another report to append: its title
    one level down, its plots under `plots_folder` (relative to the report that appends it),
    the commands that made and copied it (`env_flags`: their `--env` options) and each step's
    wall time and peak memory in front."""
    body = report_text.split("\n", 1)[1] if report_text.startswith("# ") else report_text
    body = re.sub(r"\A\s*Generated by [^\n]*\n+```\n[^`]*```\n", "", body)  # the section says it
    body = re.sub(r"!\[([^\]]*)\]\(([^)/]+\.png)\)", rf"![\1]({plots_folder}/\2)", body)
    return "\n".join(
        [
            f"## The {preset} preset: a committed snapshot",
            "",
            f"Not recomputed by the demo: `jobrec run {env_flags}` computed these tables, and "
            f"`jobrec snapshot {env_flags}` copied them here. Its steps (the "
            "wall time of a step's last attempt, when it was stopped and resumed; the peak "
            "memory of the process tree, the Elasticsearch node left out):",
            "",
            "```",
            steps,
            "```",
            "",
            body.strip("\n"),
            "",
        ]
    )


def findings(report: EvaluationReport) -> list[str]:
    """One generated sentence per experiment: what the numbers say, for the reader in a hurry."""
    lines = []
    rerankers = [(r.ranker, r.map) for r in report.protocol if r.ranker != BM25]
    measured = [(ranker, value) for ranker, value in rerankers if value is not None]
    if measured:
        ranker, best = max(measured, key=lambda pair: pair[1])
        lines.append(
            f"- The paper's protocol: the best MAP@{report.k} of the rankers that do not read "
            f"BM25 is {ranker}'s ({best:.3f})."
        )
    others = [g for g in report.ground_truth if g.versus_reference is not None]
    if others:
        best_gt = max(others, key=lambda g: g.precision)
        versus = best_gt.versus_reference
        assert versus is not None
        if best_gt.p_holm < 0.05:
            verdict = "beats" if versus.mean > 0 else "is worse than"
            verdict += " BM25's own order, significantly"
        else:
            verdict = "shows no significant difference from BM25's own order"
        lines.append(
            f"- Ground truth: the best re-ranker, {best_gt.ranker} (P@{report.k} "
            f"{best_gt.precision:.3f}), {verdict} (paired difference {versus.mean:+.3f}, 95% CI "
            f"[{versus.low:+.3f}, {versus.high:+.3f}], Holm-corrected p {best_gt.p_holm:.4f})."
        )
    if report.agreement is not None:
        lines.append(
            f"- Held-out interest: across {report.agreement.rankers} rankers, the held-out log "
            f"rank orders them like the ground truth's P@{report.k} with Spearman "
            f"{report.agreement.spearman:+.2f} (Kendall {report.agreement.kendall:+.2f})."
        )
    if report.temporal is not None:
        lines += temporal_findings(report.temporal, report.k)
    return [*lines, ""] if lines else []


def temporal_findings(temporal: TemporalEvaluation, k: int) -> list[str]:
    """Per setting of the temporal evaluation, the champion against BM25 and its share of
    fresh ads against theirs among the relevant jobs."""
    lines = []
    for setting in temporal.settings:
        rows = {row.ranker: row for row in setting.rows}
        champion = rows.get(setting.champion or "")
        if champion is None or champion.versus_bm25 is None:
            continue
        d = champion.versus_bm25
        sentence = (
            f"- Temporal, {setting.name}: the champion, {champion.ranker}, has P@{k} "
            f"{champion.precision.mean:.3f}, {d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}] over "
            "BM25"
        )
        if setting.name == ALL_LIVE:
            sentence += (
                f"; fresh ads are {champion.fresh_share:.1%} of its top {k}, "
                f"{setting.relevant_fresh_share:.1%} of the relevant jobs in the pools"
            )
        lines.append(sentence + ".")
    return lines


def figures(report: EvaluationReport) -> dict[str, Any]:
    found = {}
    if report.curve:
        found[CURVE_PLOT] = curve_figure(report)
    if report.ground_truth:
        found[GROUND_TRUTH_PLOT] = ground_truth_figure(report)
    return found


def write_report(
    report: EvaluationReport,
    folder: Path,
    command: str,
    context: dict[str, str],
    appendices: Sequence[str] = (),
) -> Path:
    """`RESULTS.md` (`appendices` after it) and its plots in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, figure in figures(report).items():
        figure.savefig(folder / name, dpi=110)
    target = folder / "RESULTS.md"
    target.write_text(markdown(report, command, context, appendices), encoding="utf-8")
    return target


def log_report(config: JobrecConfig, report: EvaluationReport, context: dict[str, str]) -> str:
    """One MLflow run `evaluate` with the metrics, tables, plots and the report, and the
    evaluation's input Delta tables; its id."""
    import mlflow
    from pyspark.sql import SparkSession

    from jobrec_core.platform.tracking import log_stage_inputs

    # The session the evaluation ran in: the process that evaluates publishes the report.
    spark = SparkSession.builder.getOrCreate()
    with mlflow.start_run(run_name="evaluate") as run:
        mlflow.set_tags({"stage": "evaluate", **context})
        log_stage_inputs(spark, config, report.input_tables)
        mlflow.log_metrics(metrics(report))
        for point in report.curve:
            for name, value in (
                ("dev_accuracy", point.dev_accuracy),
                ("dev_map", point.dev_map),
                ("dev_held_out_mrr", point.dev_mrr),
                ("ground_truth_precision", point.precision),
            ):
                if value is not None:
                    mlflow.log_metric(f"learning_curve.{name}", value, step=point.candidates)
        for name, frame in tables(report).items():
            mlflow.log_table(frame, f"tables/{name}.json")
        for name, figure in figures(report).items():
            mlflow.log_figure(figure, name)
        mlflow.log_text(report.format(), "report.txt")
        return str(run.info.run_id)


def report_folder(config: JobrecConfig) -> Path:
    """Where an evaluation writes its report by default: the dataset's reports/evaluation."""
    return Path(local_path(table_path(config, "reports", "evaluation")))


def publish(
    config: JobrecConfig, report: EvaluationReport, folder: str | None, command: str
) -> tuple[Path, str]:
    """Log the report to MLflow and write it to `folder` (default: the dataset's
    reports/evaluation); returns (RESULTS.md, the MLflow run id)."""
    from jobrec_core.platform.tracking import configure_mlflow

    pairs = manifest.current(config, "pairs")
    context = {
        "dataset": config.data.preset,
        "index": str(pairs["index"]),
        "embeddings": str(pairs["embeddings"]),
        "pairs_config_hash": str(pairs["config_hash"]),
    }
    configure_mlflow(config)
    run_id = log_report(config, report, context)
    target = Path(folder) if folder else report_folder(config)
    appendices = read_appendices(config.evaluation.report_appendices)
    return write_report(report, target, command, context, appendices), run_id
