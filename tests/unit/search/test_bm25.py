"""The client-side cut of a search's hits: score, then job id; unknown ties refused."""

from jobrec_core.search.bm25 import ranked_hits


def test_equal_scores_are_ordered_by_job_id_and_cut():
    hits = [(7, 3.0), (9, 2.0), (4, 2.0), (1, 2.0), (5, 1.0)]
    assert ranked_hits(hits, top_k=3, asked=6) == [(7, 3.0), (1, 2.0), (4, 2.0)]


def test_a_tie_reaching_the_last_hit_asked_for_is_unknown():
    hits = [(7, 3.0), (9, 2.0), (4, 2.0), (1, 2.0)]
    assert ranked_hits(hits, top_k=2, asked=4) is None
    # fewer hits than asked: the index holds no more, the tie is whole
    assert ranked_hits(hits, top_k=2, asked=5) == [(7, 3.0), (1, 2.0)]
    # the tie ends before the last hit: its members are all there
    assert ranked_hits([*hits, (2, 1.0)], top_k=2, asked=5) == [(7, 3.0), (1, 2.0)]
