"""Re-rankers are built from `evaluation.baselines`: a decorated class and a config entry."""

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from jobrec_core.config import load_config
from jobrec_core.ranking.factory import RankingInputs, baseline_scorers
from jobrec_core.ranking.scorers import UNTRAINED, Bm25Scorer, WmdScorer, untrained
from tests.helpers import REPO


def inputs() -> RankingInputs:
    return RankingInputs(
        embeddings_version="w2v-test",
        vectors_file="/vectors.kv",
        words_and_idf=None,  # type: ignore[arg-type]
        jobs=None,  # type: ignore[arg-type]
        tokens=None,  # type: ignore[arg-type]
        graph=None,  # type: ignore[arg-type]
        dates=None,  # type: ignore[arg-type]
        connection=None,  # type: ignore[arg-type]
        index="jobs_v1",
        partitions=2,
    )


def test_the_configured_baselines_are_built_with_the_inputs_their_fields_name():
    config = load_config("local", ["evaluation.baselines=[BM25, WMD]"], REPO / "conf")
    scorers = baseline_scorers(config, inputs())
    assert scorers == [Bm25Scorer("BM25"), WmdScorer("/vectors.kv", "WMD")]


def test_a_new_reranker_is_one_decorated_class_and_one_config_entry():
    @untrained("Overlap")
    @dataclass(frozen=True)
    class OverlapScorer:
        name: str = "Overlap"

        @property
        def reads(self) -> frozenset[str]:
            return frozenset({"unigrams"})

        def score(self, frame: pd.DataFrame) -> np.ndarray:
            return frame["unigrams"].to_numpy(dtype=np.float64)

    try:
        config = load_config("local", ["evaluation.baselines=[BM25, Overlap]"], REPO / "conf")
        assert [s.name for s in baseline_scorers(config, inputs())] == ["BM25", "Overlap"]
    finally:
        del UNTRAINED["Overlap"]
    with pytest.raises(ValueError, match="unknown \\['Overlap'\\]"):
        baseline_scorers(config, inputs())


def test_an_in_memory_job_table_holds_each_jobs_word_ids():
    from jobrec_core.features.histograms import DOC_IDS, Vocabulary
    from jobrec_core.ranking.factory import with_word_ids

    words = np.array(["care", "driver", "nurse"])
    vocabulary = Vocabulary(words, np.eye(3, dtype=np.float32), np.ones(3, dtype=np.float32))
    tokens = pd.DataFrame(
        {"job_id": [1, 2, 3], "doc_tokens": [np.array(["nurse", "care"]), np.array([]), ["x"]]}
    )
    held = with_word_ids(tokens, vocabulary)
    assert [ids.tolist() for ids in held[DOC_IDS]] == [
        vocabulary.ids(["nurse", "care"]).tolist(),
        [],
        vocabulary.ids(["x"]).tolist(),
    ]
    assert with_word_ids(tokens.iloc[:0], vocabulary)[DOC_IDS].tolist() == []
