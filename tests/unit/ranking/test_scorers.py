"""What each scorer reads (`Scorer.reads`): the paper's protocol leaves out the accuracy and
MAP of a scorer that reads BM25."""

from jobrec_core.ranking.scorers import (
    Bm25Mix,
    Bm25Scorer,
    ProfileTfidfScorer,
    WmdScorer,
    drmm_scorer,
    reads_bm25,
)
from jobrec_scoring.network import Drmm, DrmmSpec


def drmm(extras: tuple[str, ...]) -> Drmm:
    return Drmm(
        DrmmSpec(
            bins=30, histogram="lch", mlp_layers=2, mlp_width=4, gating="idf", gate_dim=1,
            extras=extras,
        )
    )  # fmt: skip


def test_the_columns_each_scorer_reads():
    assert Bm25Scorer().reads == {"bm25"} and reads_bm25(Bm25Scorer())
    assert not reads_bm25(ProfileTfidfScorer()) and not reads_bm25(WmdScorer("/vectors.kv"))
    plain = drmm_scorer(None, "DRMM v1", drmm(()))
    assert not reads_bm25(plain) and {"hist", "query_idf"} <= plain.reads
    assert reads_bm25(drmm_scorer(None, "DRMM v2", drmm(("unigrams", "bigrams", "bm25"))))
    assert reads_bm25(Bm25Mix(plain, 0.5))  # mixed with BM25 after scoring
