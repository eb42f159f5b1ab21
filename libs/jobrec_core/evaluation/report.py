"""The evaluation's report: the paper's protocol, the learning curve and ground truth, printed
next to the paper's figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from jobrec_core.evaluation.curve import PAPER_CURVE, CurvePoint
from jobrec_core.evaluation.ground_truth import PAPER_PRECISION, GroundTruthRow
from jobrec_core.evaluation.protocols import BM25, PAPER_PROTOCOL, ProtocolRow


@dataclass
class EvaluationReport:
    k: int
    models: dict[str, str]  # ranker -> registry version
    skipped: dict[str, str] = field(default_factory=dict)  # ranker -> why not evaluated
    protocol: list[ProtocolRow] = field(default_factory=list)
    queries: dict[str, int] = field(default_factory=dict)  # experiment -> queries measured
    curve: list[CurvePoint] = field(default_factory=list)
    ground_truth: list[GroundTruthRow] = field(default_factory=list)

    def format(self) -> str:
        """The three tables, ours next to the paper's."""
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
        for ranker, reason in self.skipped.items():
            lines.append(f"  {ranker}: not evaluated: {reason}")
        if self.curve:
            lines += [
                "",
                "2. Learning curve (dev split; paper's figures in brackets)",
                f"  {'triples':>9}{'asked':>8}{'epochs':>8}{'dev accuracy':>22}{'dev MAP':>20}",
            ]
            for point in self.curve:
                paper_acc, paper_map = PAPER_CURVE.get(point.configured, (None, None))
                lines.append(
                    f"  {point.triples:>9,}{point.configured:>8,}{point.epochs:>8}"
                    f"{_with_paper(point.dev_accuracy, paper_acc):>22}"
                    f"{_with_paper(point.dev_map, paper_map):>20}"
                )
        if self.ground_truth:
            lines += [
                "",
                f"3. Ground truth: {self.queries.get('ground_truth', 0):,} held-out candidates, "
                f"BM25's top 100 re-ranked, top {k} judged against their latent interests",
                f"  {'ranker':<10}{f'P@{k}':>18}{f'nDCG@{k}':>10}{'diversity':>11}",
            ]
            for gt in self.ground_truth:
                precision = _with_paper(gt.precision, PAPER_PRECISION.get(gt.ranker))
                lines.append(
                    f"  {gt.ranker:<10}{precision:>18}{gt.ndcg:>10.3f}{gt.diversity:>11.2f}"
                )
            lines.append("  (the paper's P@10 was judged by hand on 100 candidates)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _with_paper(ours: float | None, paper: float | None, spec: str = ".3f") -> str:
    """Our figure, with the paper's in brackets when it reports one."""
    text = "-" if ours is None or np.isnan(ours) else format(ours, spec)
    return text if paper is None else f"{text} ({format(paper, spec)})"
