"""The temporal evaluation's judge: ground truth, the candidates' own later interest and the
fresh ads' share, on scored pools."""

import numpy as np
import pandas as pd
import pytest

from jobrec_core.evaluation.temporal import (
    ALL_LIVE,
    FRESH,
    FUTURE,
    LabelledPools,
    judge_setting,
)


def pools(candidates: int) -> pd.DataFrame:
    """Per candidate 20 jobs: the first 10 relevant; jobs 10-19 fresh; job 3 the one they
    went on to show interest in. BM25 ranks by job id, 'Oracle' relevant first and fresh
    among them first, 'Stale' relevant but fresh last."""
    rows = []
    for candidate in range(candidates):
        for job in range(20):
            relevant = job < 10
            fresh = job >= 5 if relevant else job >= 15
            rows.append(
                {
                    "candidate_id": candidate,
                    "job_id": job,
                    "label": int(relevant),
                    FUTURE: int(job == 3),
                    FRESH: int(fresh),
                    "score_bm25": float(-job if candidate % 2 else job),  # half get it upside down
                    "score_oracle": float(relevant) + 0.5 * fresh,
                    "score_stale": float(relevant) - 0.5 * fresh,
                }
            )
    return pd.DataFrame(rows)


def test_rankers_are_judged_on_the_ground_truth_their_futures_and_fresh_shares():
    candidates = np.arange(40)
    setting = judge_setting(
        ALL_LIVE,
        "jobs_window_v1",
        20,
        LabelledPools(pools(40), ["BM25", "Oracle", "Stale"]),
        None,
        candidates,
        np.ones(40),
        k=10,
        resamples=500,
        seed=1,
        champion="Oracle",
        baselines=["Stale"],
    )
    rows = {row.ranker: row for row in setting.rows}
    assert rows["BM25"].precision.mean == pytest.approx(0.5)  # half the candidates upside down
    assert rows["Oracle"].precision.mean == rows["Stale"].precision.mean == pytest.approx(1.0)
    assert rows["Oracle"].versus_bm25 is not None and rows["Oracle"].versus_bm25.low > 0
    assert rows["Oracle"].future_recall.mean == pytest.approx(1.0)
    # of the 10 relevant jobs, 5 are fresh: Stale and Oracle both show all 10 of them
    assert setting.relevant_fresh_share == pytest.approx(0.5)
    assert rows["Oracle"].fresh_share == rows["Stale"].fresh_share == pytest.approx(0.5)
    assert setting.ceiling.mean == pytest.approx(1.0)
    [versus] = setting.versus_baselines
    assert versus.baseline == "Stale" and versus.precision.mean == pytest.approx(0.0)


def test_the_served_pipeline_is_judged_on_its_own_pools_and_a_missing_pool_finds_nothing():
    candidates = np.arange(10)
    served = pools(9).rename(columns={"score_oracle": "score_drmm"})  # candidate 9: no pool
    setting = judge_setting(
        ALL_LIVE,
        "jobs_window_v1",
        20,
        LabelledPools(pools(10), ["BM25"]),
        ("hybrid >> DRMM", LabelledPools(served, ["DRMM"])),
        candidates,
        np.ones(10),
        k=10,
        resamples=500,
        seed=1,
        champion=None,
        baselines=[],
    )
    rows = {row.ranker: row for row in setting.rows}
    assert list(rows) == ["BM25", "hybrid >> DRMM"]
    assert rows["hybrid >> DRMM"].precision.mean == pytest.approx(0.9)
    assert setting.candidates == 10 and setting.versus_baselines == []
