"""The evaluation's report: the paper's protocol, the learning curve, the ground truth and the
held-out interest, printed next to the paper's figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from jobrec_core.evaluation.curve import PAPER_CURVE, CurvePoint
from jobrec_core.evaluation.ground_truth import (
    PAPER_PRECISION,
    BaselineComparison,
    GroundTruthRow,
)
from jobrec_core.evaluation.held_out import Agreement, HeldOutRow
from jobrec_core.evaluation.protocols import BM25, PAPER_PROTOCOL, ProtocolRow
from jobrec_core.evaluation.retrievers import RetrieverComparison, Selection
from jobrec_core.evaluation.temporal import TemporalEvaluation
from jobrec_core.ranking.metrics import geometric_mean_rank
from jobrec_core.ranking.statistics import SIGNIFICANCE, Interval, PairedDifference

# Why a ranker that reads BM25 has no accuracy or MAP (`protocols.ProtocolRow`).
READS_BM25_NOTE = (
    "  (accuracy and MAP -: the model reads BM25, and a negative carries the BM25 of the less "
    "informative query that found it, a positive the full query's)"
)


@dataclass
class EvaluationReport:
    k: int
    models: dict[str, str]  # ranker -> registry version
    skipped: dict[str, str] = field(default_factory=dict)  # ranker -> why not evaluated
    protocol: list[ProtocolRow] = field(default_factory=list)
    queries: dict[str, int] = field(default_factory=dict)  # experiment -> queries measured
    curve: list[CurvePoint] = field(default_factory=list)
    curve_model: str = ""  # the configuration the learning curve trained
    versus_baseline: list[BaselineComparison] = field(default_factory=list)
    ground_truth: list[GroundTruthRow] = field(default_factory=list)
    ceiling: Interval | None = None  # the best P@k inside the ground truth's pools
    real_ad_slice: list[GroundTruthRow] = field(default_factory=list)  # real ads relevant
    held_out: list[HeldOutRow] = field(default_factory=list)
    held_out_found: float = float("nan")  # share of held-out jobs in the pool at all
    # the held-out log-rank score against ground-truth P@k, across rankers
    agreement: Agreement | None = None
    retrievers: RetrieverComparison | None = None  # experiment 5: pools and whole pipelines
    temporal: TemporalEvaluation | None = None  # experiment 6: judged after the as-of date
    input_tables: list[str] = field(default_factory=list)  # the Delta tables it measured on

    def format(self) -> str:
        """The tables, ours next to the paper's."""
        k = self.k
        lines = [
            f"1. The paper's protocol: {self.queries.get('triples', 0):,} test triples, "
            f"{self.queries.get('map', 0):,} MAP test queries (paper's figures in brackets)",
            f"  {'ranker':<10}{'accuracy':>18}{f'MAP@{k}':>18}{'diversity':>18}",
        ]
        for row in self.protocol:
            paper = PAPER_PROTOCOL.get(row.ranker, {})
            lines.append(
                f"  {row.ranker:<10}{_with_paper(row.accuracy, paper.get('accuracy')):>18}"
                f"{_with_paper(row.map, paper.get('map')):>18}"
                f"{_with_paper(row.diversity, paper.get('diversity'), '.2f'):>18}"
            )
        lines.append(f"  ({BM25}'s MAP is 1 by construction: its top 50 are the relevant ones)")
        if any(row.map is None for row in self.protocol):
            lines.append(READS_BM25_NOTE)
        for ranker, reason in self.skipped.items():
            lines.append(f"  {ranker}: not evaluated: {reason}")
        if self.curve:
            lines += [
                "",
                f"2. Learning curve of {self.curve_model}: training candidates (one triple, or "
                "the pairs of each of their training lists); dev split, the epoch kept; "
                "ground truth as in 3 "
                "(the paper's figures, for its triples, in brackets)",
                f"  {'trained':>9}{'asked':>8}{'epochs':>8}{'dev accuracy':>22}{'dev MAP':>20}"
                f"{'dev MRR':>9}{f'GT P@{k}':>10}{'95% CI':>16}{f'nDCG@{k}':>9}",
            ]
            for point in self.curve:
                paper_acc, paper_map = PAPER_CURVE.get(point.configured, (None, None))
                lines.append(
                    f"  {point.candidates:>9,}{point.configured:>8,}{point.epochs:>8}"
                    f"{_with_paper(point.dev_accuracy, paper_acc):>22}"
                    f"{_with_paper(point.dev_map, paper_map):>20}{point.dev_mrr:>9.4f}"
                    f"{point.precision:>10.3f}"
                    f"{_interval(point.precision_low, point.precision_high):>16}"
                    f"{point.ndcg:>9.3f}"
                )
            if any(point.dev_map is None for point in self.curve):
                lines.append(READS_BM25_NOTE)
        if self.ground_truth:
            lines += ["", *self._ground_truth_lines()]
        if self.held_out:
            lines += ["", *self._held_out_lines()]
        if self.retrievers is not None:
            lines += ["", *self._retriever_lines(self.retrievers)]
        if self.temporal is not None:
            lines += ["", *self._temporal_lines(self.temporal)]
        return "\n".join(lines)

    def _temporal_lines(self, temporal: TemporalEvaluation) -> list[str]:
        k = self.k
        judged = temporal.settings[0].candidates if temporal.settings else 0
        lines = [
            f"6. Temporal: cut at {temporal.as_of}, the pipeline's as-of date (training, "
            f"features and the gate saw nothing later); the {judged:,} candidates cleaned by "
            f"then who show interest from {temporal.first} to {temporal.last}, judged on that "
            "window's ads",
            f"  (P@{k}, nDCG@{k}: the ground truth; future: the share of the ads they went on to "
            f"show interest in that are in the top {k}; fresh: the share of the top {k} posted "
            "after the cut; paired per candidate against BM25, Holm-corrected)",
        ]
        for setting in temporal.settings:
            lines += [
                f"  {setting.name}: {setting.ads:,} ads ({setting.index}); ceiling P@{k} "
                f"{setting.ceiling.mean:.3f}; fresh ads are {setting.relevant_fresh_share:.1%} "
                "of the relevant jobs in BM25's pools",
                f"  {'ranker':<24}{f'P@{k}':>7}{'95% CI':>16}{f'nDCG@{k}':>9}{'future':>8}"
                f"{'fresh':>7}{'vs BM25':>9}{'95% CI':>18}{'p':>8}",
            ]
            for row in setting.rows:
                line = (
                    f"  {row.ranker:<24}{row.precision.mean:>7.3f}"
                    f"{_interval(row.precision.low, row.precision.high):>16}"
                    f"{row.ndcg.mean:>9.3f}{row.future_recall.mean:>8.3f}{row.fresh_share:>7.1%}"
                )
                lines.append((line + _difference(row.versus_bm25, row.p_holm, 9, 8)).rstrip())
            if setting.versus_baselines:
                versus = "; ".join(
                    f"{c.baseline} {c.precision.mean:+.3f} "
                    f"{_interval(c.precision.low, c.precision.high, '+.3f')} p {c.p_holm:.4f}"
                    for c in setting.versus_baselines
                )
                lines.append(f"  the champion, {setting.champion}, against {versus}")
        held_out = temporal.held_out
        if held_out is not None and held_out.rows:
            lines += [
                "  Held-out interest of this mode: each candidate's latest interest before the "
                "cut held out, the query from the earlier ones, the pool from every ad posted "
                f"by then (held-out job in the pool for {held_out.found:.1%})",
                f"  {'ranker':<24}{'MRR':>7}{'log-rank':>10}{'vs BM25':>9}{'95% CI':>18}{'p':>8}",
            ]
            for held in held_out.rows:
                lines.append(
                    f"  {held.ranker:<24}{held.mrr:>7.3f}{held.log_rank:>10.3f}"
                    f"{_difference(held.versus_reference, held.p_holm, 9, 8)}".rstrip()
                )
        if temporal.agreement is not None:
            lines.append(
                f"  Agreement with the all-live ground truth across {temporal.agreement.rankers} "
                f"rankers (held-out log rank vs P@{k}): Spearman "
                f"{temporal.agreement.spearman:+.2f}, Kendall {temporal.agreement.kendall:+.2f}"
            )
        return lines

    def _retriever_lines(self, compared: RetrieverComparison) -> list[str]:
        k = self.k
        orders = (
            "in its own order and re-ranked by the champion"
            if any(row.reranker for row in compared.pipelines)
            else "in its own order alone, as served while no model has passed the gate"
        )
        lines = [
            f"5. Retrievers: {compared.candidates:,} ground-truth candidates and "
            f"{compared.held_out_candidates:,} held-out-interest queries, each retriever's pool "
            f"(at most 100 jobs, own jobs left out) {orders}",
            f"  {'pool':<10}{'recall':>8}{'95% CI':>16}{f'ceiling P@{k}':>15}"
            f"{'vs bm25':>10}{'95% CI':>18}{'p':>9}{'held-out found':>16}",
        ]
        for pool in compared.pools:
            d = pool.versus_bm25
            versus = (
                f"{d.mean:>+10.3f}{_interval(d.low, d.high, '+.3f'):>18}{pool.p_holm:>9.4f}"
                if d is not None
                else f"{'':>37}"
            )
            lines.append(
                f"  {pool.retriever:<10}{pool.recall.mean:>8.3f}"
                f"{_interval(pool.recall.low, pool.recall.high):>16}{pool.ceiling.mean:>15.3f}"
                f"{versus}{pool.held_out_found:>16.3f}"
            )
        lines += [
            f"  Pipelines: ground truth (P@{k}, nDCG@{k}*) and held-out interest (MRR, the "
            "geometric-mean rank and the log-rank score), each paired per candidate against "
            f"{compared.reference} (Holm-corrected)",
            f"  {'pipeline':<24}{f'P@{k}':>7}{'95% CI':>16}{f'nDCG@{k}*':>9}"
            f"{f'P@{k} diff':>11}{'95% CI':>18}{'p':>8}{'MRR':>7}{'GM rank':>9}"
            f"{'log-rank diff':>15}{'95% CI':>18}{'p':>8}",
        ]
        for row in compared.pipelines:
            line = (
                f"  {row.name:<24}{row.precision.mean:>7.3f}"
                f"{_interval(row.precision.low, row.precision.high):>16}{row.ndcg.mean:>9.3f}"
                f"{_difference(row.versus_reference, row.p_holm, 11, 8)}"
            )
            if row.held_out_mrr is not None and row.held_out_log_rank is not None:
                gm_rank = geometric_mean_rank(row.held_out_log_rank.mean)
                line += f"{row.held_out_mrr.mean:>7.3f}{gm_rank:>9.2f}"
                line += _difference(row.held_out_versus, row.held_out_p_holm, 15, 8)
            lines.append(line.rstrip())
        lines.append(
            f"  *: nDCG@{k}'s ideal is the candidate's relevant jobs in the whole collection, "
            "not in the pool (as in 3): pools that differ are judged on one scale"
        )
        selection = compared.selection
        if selection is not None:
            lines.append(f"  selected by the held-out log rank: {_selection(selection)}")
        knn = compared.knn
        if knn is not None:
            by_k = ", ".join(f"{k}: {score:.4f}" for k, score in knn.log_rank_by_k.items())
            kept = "the mix" if knn.alpha < 1.0 else "the re-ranker alone (no gain above noise)"
            lines += [
                f"  kNN (seed 003): a memory of {knn.memory:,} past candidates; on "
                f"{knn.dev_candidates:,} dev candidates' held-out interest, k = {knn.k} "
                f"(the votes' log-rank score by k: {by_k}),",
                f"  then λ = {knn.lam:.2f}: {kept} (best dev log-rank score "
                f"{max(knn.log_rank_by_alpha.values(), default=float('nan')):.4f}, the re-ranker "
                f"alone {knn.log_rank_by_alpha.get(1.0, float('nan')):.4f})",
            ]
        return lines

    def _ground_truth_lines(self) -> list[str]:
        k = self.k
        lines = [
            f"3. Ground truth: {self.queries.get('ground_truth', 0):,} held-out candidates, "
            f"BM25's top 100 re-ranked, top {k} judged against their latent interests "
            "(95% bootstrap intervals over candidates)",
            f"  {'ranker':<10}{f'P@{k}':>18}{'95% CI':>16}{f'nDCG@{k}':>10}{'95% CI':>16}"
            f"{'diversity':>11}",
        ]
        for gt in self.ground_truth:
            precision = _with_paper(gt.precision, PAPER_PRECISION.get(gt.ranker))
            precision_ci = _interval(gt.precision_low, gt.precision_high)
            ndcg_ci = _interval(gt.ndcg_low, gt.ndcg_high)
            lines.append(
                f"  {gt.ranker:<10}{precision:>18}{precision_ci:>16}"
                f"{gt.ndcg:>10.3f}{ndcg_ci:>16}{gt.diversity:>11.2f}"
            )
        lines.append(
            "  (the paper's P@10 was judged by hand on 100 candidates; nDCG's ideal is the best "
            "order of the pool itself, the same for every ranker)"
        )
        if self.ceiling is not None:
            lines.append(
                f"  ceiling: the best order of the same pools reaches P@{k} "
                f"{self.ceiling.mean:.3f} {_interval(self.ceiling.low, self.ceiling.high)}"
            )
        compared = [gt for gt in self.ground_truth if gt.versus_reference is not None]
        if compared:
            lines += [
                f"  Against BM25, paired per candidate (P@{k}; p: sign-flip randomisation, "
                "Holm-corrected)",
                f"  {'ranker':<10}{'difference':>12}{'95% CI':>18}{'p':>9}"
                f"{'wins':>7}{'ties':>7}{'losses':>8}",
            ]
            for gt in compared:
                lines.append(_paired_line(gt.ranker, gt.versus_reference, gt.p_holm))
        if self.versus_baseline:
            baseline = self.versus_baseline[0].baseline
            lines += [
                f"  Against {baseline}, paired per candidate (P@{k} and nDCG@{k}; p: sign-flip "
                "randomisation, Holm-corrected)",
                f"  {'ranker':<10}{f'P@{k} diff':>12}{'95% CI':>18}{'p':>9}"
                f"{f'nDCG@{k} diff':>14}{'95% CI':>18}{'p':>9}",
            ]
            for c in self.versus_baseline:
                lines.append(
                    f"  {c.ranker:<10}{c.precision.mean:>+12.3f}"
                    f"{_interval(c.precision.low, c.precision.high, '+.3f'):>18}"
                    f"{c.precision_p:>9.4f}{c.ndcg.mean:>+14.3f}"
                    f"{_interval(c.ndcg.low, c.ndcg.high, '+.3f'):>18}{c.ndcg_p:>9.4f}"
                )
        if self.real_ad_slice:
            lines += [
                f"  Slice: the {self.queries.get('ground_truth_real_ads', 0):,} candidates whose "
                f"relevant jobs in the pool include a real ad (P@{k}; against BM25 paired, "
                "Holm-corrected)",
                f"  {'ranker':<10}{f'P@{k}':>8}{'95% CI':>16}{'difference':>12}{'95% CI':>18}"
                f"{'p':>9}",
            ]
            for gt in self.real_ad_slice:
                line = (
                    f"  {gt.ranker:<10}{gt.precision:>8.3f}"
                    f"{_interval(gt.precision_low, gt.precision_high):>16}"
                )
                d = gt.versus_reference
                if d is not None:
                    line += (
                        f"{d.mean:>+12.3f}{_interval(d.low, d.high, '+.3f'):>18}{gt.p_holm:>9.4f}"
                    )
                lines.append(line)
        return lines

    def _held_out_lines(self) -> list[str]:
        k = self.k
        lines = [
            f"4. Held-out interest: {self.queries.get('held_out', 0):,} held-out candidates, their "
            "highest-scored job held out, the query from the others, the same pipeline "
            f"(held-out job in the pool for {self.held_out_found:.1%})",
            f"  {'ranker':<10}{'MRR':>8}{'95% CI':>16}{f'Recall@{k}':>11}{'95% CI':>16}"
            f"{f'nDCG@{k}':>9}{'95% CI':>16}{'log-rank':>10}{'95% CI':>18}{'GM rank':>9}",
        ]
        for row in self.held_out:
            lines.append(
                f"  {row.ranker:<10}{row.mrr:>8.3f}{_interval(row.mrr_low, row.mrr_high):>16}"
                f"{row.recall:>11.3f}{_interval(row.recall_low, row.recall_high):>16}"
                f"{row.ndcg:>9.3f}{_interval(row.ndcg_low, row.ndcg_high):>16}"
                f"{row.log_rank:>10.3f}{_interval(row.log_rank_low, row.log_rank_high):>18}"
                f"{geometric_mean_rank(row.log_rank):>9.2f}"
            )
        compared = [row for row in self.held_out if row.versus_reference is not None]
        if compared:
            lines += [
                "  Against BM25, paired per candidate (the log-rank score, what selects; p: "
                "sign-flip randomisation, Holm-corrected)",
                f"  {'ranker':<10}{'difference':>12}{'95% CI':>18}{'p':>9}"
                f"{'wins':>7}{'ties':>7}{'losses':>8}",
            ]
            for row in compared:
                lines.append(_paired_line(row.ranker, row.versus_reference, row.p_holm))
        if self.agreement is not None:
            lines.append(
                f"  Agreement with the ground truth across {self.agreement.rankers} rankers "
                f"(held-out log rank vs P@{k}): Spearman {self.agreement.spearman:+.2f}, "
                f"Kendall {self.agreement.kendall:+.2f}"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _paired_line(ranker: str, difference: PairedDifference | None, p_holm: float) -> str:
    assert difference is not None
    d = difference
    return (
        f"  {ranker:<10}{d.mean:>+12.3f}{_interval(d.low, d.high, '+.3f'):>18}"
        f"{p_holm:>9.4f}{d.wins:>7,}{d.ties:>7,}{d.losses:>8,}"
    )


def _difference(d: PairedDifference | None, p: float, width: int, p_width: int) -> str:
    """A paired difference's columns (mean, CI, p); blanks for the reference itself."""
    if d is None:
        return " " * (width + 18 + p_width)
    return f"{d.mean:>+{width}.3f}{_interval(d.low, d.high, '+.3f'):>18}{p:>{p_width}.4f}"


def _selection(selection: Selection) -> str:
    """The selected pipeline, and why: the served one with no other significantly above it,
    or another one's log-rank gain over it."""
    gain = selection.gain
    if gain is None:
        return (
            f"{selection.served} (served: no other pipeline's log-rank score significantly "
            f"above it, Holm-corrected p < {SIGNIFICANCE})"
        )
    return (
        f"{selection.pipeline}, log-rank score {gain.mean:+.3f} "
        f"{_interval(gain.low, gain.high, '+.3f')} above the served {selection.served} "
        f"(Holm-corrected p {selection.p_holm:.4f})"
    )


def _interval(low: float, high: float, spec: str = ".3f") -> str:
    return f"[{format(low, spec)}, {format(high, spec)}]"


def _with_paper(ours: float | None, paper: float | None, spec: str = ".3f") -> str:
    """Our figure, with the paper's in brackets when it reports one."""
    text = "-" if ours is None or np.isnan(ours) else format(ours, spec)
    return text if paper is None else f"{text} ({format(paper, spec)})"
