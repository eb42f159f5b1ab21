"""The collection's relevant jobs per candidate, by grade, their own jobs left out."""

from __future__ import annotations

from jobrec_core.evaluation.ground_truth import relevant_totals


def test_each_candidates_relevant_jobs_are_counted_by_grade_without_their_own(spark):
    # occupation 1: jobs 10-12, occupation 2: jobs 20-21, occupation 3: job 30
    jobs = spark.createDataFrame(
        [(10, 1), (11, 1), (12, 1), (20, 2), (21, 2), (30, 3), (40, None)],
        "job_id long, occupation_code int",
    )
    truth = spark.createDataFrame(
        [(1, {1: 2, 2: 1}), (2, {3: 2}), (3, {9: 2})],
        "candidate_id long, occupation_relevance map<int,int>",
    )
    # candidate 1 applied to 10 (twice) and 20; 2 to 40 (no occupation); 4 has no truth
    queries = spark.createDataFrame(
        [(1, [10, 10, 20]), (2, [40]), (3, []), (4, [11])],
        "candidate_id long, own_job_ids array<long>",
    )
    totals = {
        r["candidate_id"]: (r["primary"], r["related"])
        for r in relevant_totals(queries, jobs, truth).collect()
    }
    assert totals == {1: (2, 1), 2: (1, 0), 3: (0, 0), 4: (0, 0)}
