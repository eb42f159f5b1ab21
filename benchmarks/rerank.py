"""Latency to re-rank one candidate's BM25 results with DRMM, on one CPU core, against the
seed's baseline re-ranker (WMD over the same jobs).

    .venv/bin/python benchmarks/rerank.py
    .venv/bin/python benchmarks/rerank.py --jobs 100 1000 --version v2
    .venv/bin/python benchmarks/rerank.py --version v5   # with the candidate-profile features

One request is what serving does after retrieval: the matching histograms, IDFs and common
unigrams/bigrams of every job against the query (`features.matching.document_features`, one
matrix product), the rows in the registered model's input shape, the DRMM scores
(`jobrec_scoring.model.score_frame`, the pyfunc's own code) and the top 10. The WMD baseline
scores the same jobs with `ranking.scorers.WmdScorer` (gensim-equal WMD). A configuration
with profile features (v5, v10) also computes those it reads per request
(`features.profile`, as the served pipeline does): the text similarity to the candidate's
own jobs (--own-jobs), the interest graph's two-step walks, each job with --neighbours graph
neighbours, and so on. Vectors: a synthetic vocabulary of the demo's size (or --vectors, a
gensim KeyedVectors file), words drawn with Zipf frequencies as in text; sizes default to
the demo's (median query 52 words, mean job 127 words). Each job's words are held as
vocabulary ids, as `jobrec serve` holds them (`ranking.factory.with_word_ids`, looked up
once at start-up); `--word-strings` passes the words themselves (object arrays of `str`, as
a Spark pool gives them) to time the lookup too. The network's weights do not change its
cost, so it is freshly initialised from conf/. What start-up built is frozen out of the
garbage collector's scans, as `jobrec serve` does (`platform.heap`).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as an executor slot
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import numpy as np
import pandas as pd
import torch

from jobrec_core.config import load_config
from jobrec_core.features.behaviour import BEHAVIOUR_FOLDS, behaviour_similarity
from jobrec_core.features.histograms import Vocabulary
from jobrec_core.features.matching import PROFILE_FEATURES, document_features, query_features
from jobrec_core.features.occupations import occupation_agreement
from jobrec_core.features.profile import co_interest_scores, text_similarities
from jobrec_core.models.drmm import spec_from_config
from jobrec_core.platform.heap import freeze_long_lived
from jobrec_core.ranking.scorers import WmdScorer
from jobrec_core.text.vectors import keyed_vectors
from jobrec_scoring.model import score_frame
from jobrec_scoring.network import Drmm

K = 10
TITLE_TERMS = 5  # a generated title's words, about
BEHAVIOUR_DIMENSIONS = 128  # per fold, as `pairs.behaviour_dimensions`


def synthetic_vectors(words: int, dim: int, path: str) -> str:
    from gensim.models import KeyedVectors

    rng = np.random.default_rng(7)
    keyed = KeyedVectors(vector_size=dim)
    keyed.add_vectors(
        [f"w{i}" for i in range(words)], rng.normal(size=(words, dim)).astype(np.float32)
    )
    keyed.save(path)
    return path


def vocabulary_of(path: str) -> Vocabulary:
    keyed = keyed_vectors(path)
    words = np.asarray(keyed.index_to_key, dtype=str)
    idf = np.random.default_rng(1).uniform(1, 10, len(words)).astype(np.float32)
    vectors = np.asarray(keyed.vectors)
    return Vocabulary(words, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), idf)


@dataclass(frozen=True)
class Profile:
    """One candidate's own jobs (texts and graph rows) and its pool's graph rows."""

    own_texts: list[np.ndarray]
    own_jobs: np.ndarray
    own_links: list[tuple[np.ndarray, np.ndarray]]
    pool_links: list[tuple[np.ndarray, np.ndarray]]
    own_behaviour: list[np.ndarray]  # the jobs' behaviour vectors, every fold (v12)
    pool_behaviour: list[np.ndarray]

    @staticmethod
    def synthetic(
        rng: np.random.Generator, own_texts: list[np.ndarray], pool: int, neighbours: int
    ) -> Profile:
        def links() -> tuple[np.ndarray, np.ndarray]:
            ids = rng.choice(50_000, neighbours, replace=False)
            return ids, rng.integers(1, 4, neighbours)

        def behaviour(jobs: int) -> list[np.ndarray]:
            width = BEHAVIOUR_FOLDS * BEHAVIOUR_DIMENSIONS
            return list(rng.standard_normal((jobs, width)).astype(np.float32))

        own = len(own_texts)
        return Profile(
            own_texts,
            np.arange(own) + 100_000,
            [links() for _ in range(own)],
            [links() for _ in range(pool)],
            behaviour(own),
            behaviour(pool),
        )


def rerank(
    model: Drmm,
    vocabulary: Vocabulary,
    query: list[str],
    docs: Sequence[Sequence[str] | np.ndarray],
    bins: int,
    profile: Profile,
) -> np.ndarray:
    """One request: features, model input rows, scores, the top k."""
    features = query_features(vocabulary, query)
    # the lead fields' terms, split off only for a model that reads them (DRMM-fields, v9)
    titles = [TITLE_TERMS] * len(docs) if model.spec.field_histograms else None
    columns: dict[str, Any] = {**document_features(vocabulary, features, docs, bins, titles)}
    columns["query_idf"] = [features.idf] * len(docs)
    columns["query_terms"] = [query] * len(docs)
    # each word's share of the candidate's jobs (read by a gate with `gate_share`, v8)
    columns["query_job_share"] = [np.linspace(1.0, 0.2, len(query), dtype=np.float32)] * len(docs)
    columns["bm25"] = np.linspace(20, 5, len(docs), dtype=np.float32)
    # the profile features the model reads, as the served pipeline computes them
    # (`ranking.factory.featured_pool`)
    reads = set(model.spec.extras)
    if reads & set(PROFILE_FEATURES):
        texts = [np.asarray(d) for d in docs]
        columns["profile_tfidf"], columns["profile_w2v"], own_weights = text_similarities(
            vocabulary, profile.own_texts, texts
        )
    if "co_interest" in reads:
        columns["co_interest"] = co_interest_scores(
            [n for n, _ in profile.own_links],
            [c for _, c in profile.own_links],
            [n for n, _ in profile.pool_links],
            [c for _, c in profile.pool_links],
            np.full(len(texts), 5),
            profile.own_jobs,
            np.arange(len(texts)),
            profile.own_jobs,
            own_weights,
        )
    if "profile_behaviour" in reads:
        columns["profile_behaviour"] = behaviour_similarity(
            profile.own_behaviour, profile.pool_behaviour, 0, own_weights
        )
    if "occupation_agreement" in reads:  # a handful of title occupations per candidate and pool
        columns["occupation_agreement"] = occupation_agreement(
            np.arange(len(profile.own_texts)) % 3, own_weights, np.arange(len(docs)) % 7
        )
    # the rows in the registered model's input shape, built at once (not column by column),
    # from the arrays as they are (`copy=False`: pandas would copy them into 2-d blocks)
    scores = score_frame(model, pd.DataFrame(columns, copy=False))
    return np.argsort(-scores)[:K]


def percentiles(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    run()  # warm-up: first-call allocations
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    p50, p95 = np.percentile(times, [50, 95])
    return float(p50) * 1e3, float(p95) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 1000])
    parser.add_argument(
        "--query-terms", type=int, default=52, help="words in the query (demo median)"
    )
    parser.add_argument(
        "--doc-terms", type=int, default=127, help="words per job (demo mean; cap 500)"
    )
    parser.add_argument("--version", default="v1", help="model configuration of conf/")
    parser.add_argument("--vectors", default=None, help="a gensim KeyedVectors file")
    parser.add_argument("--own-jobs", type=int, default=5, help="the candidate's (demo mean)")
    parser.add_argument("--neighbours", type=int, default=30, help="graph links per job")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--wmd-repeats", type=int, default=5)
    parser.add_argument(
        "--word-strings", action="store_true", help="jobs as words, looked up per request"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)

    # the lead fields as in conf/base.yaml, which v9 needs and the demo's overlay turns off
    config = load_config(
        "local", [f"model.version={args.version}", "histograms.lead_fields=[title]"], None
    )
    path = args.vectors or synthetic_vectors(
        20_000, config.embeddings.vector_size, "/tmp/jobrec-bench-vectors.kv"
    )
    vocabulary = vocabulary_of(path)
    model = Drmm(spec_from_config(config, config.embeddings.vector_size)).eval()
    rng = np.random.default_rng(11)
    words = vocabulary.words
    zipf = 1.0 / np.arange(1, len(words) + 1)  # word frequencies of text: rank^-1
    zipf /= zipf.sum()
    query = rng.choice(words, args.query_terms, replace=False, p=zipf).tolist()
    wmd = WmdScorer(path)
    freeze_long_lived()  # as `jobrec serve` after its start-up (`serving.stage`)

    print(
        f"one CPU thread; query {args.query_terms} words, jobs of {args.doc_terms} words, "
        f"DRMM {args.version} {model.spec.mlp_layers}x{model.spec.mlp_width}, "
        f"{config.histograms.bins} bins"
    )
    header = ("jobs", "DRMM p50 ms", "p95 ms", "WMD p50 ms", "p95 ms", "speed-up")
    print("".join(f"{h:>{w}}" for h, w in zip(header, (6, 13, 9, 12, 9, 10), strict=True)))
    for count in args.jobs:
        docs = [
            np.array(rng.choice(words, args.doc_terms, p=zipf).tolist(), dtype=object)
            for _ in range(count)
        ]
        frame = pd.DataFrame({"query_terms": [query] * count, "doc_tokens": docs})
        held = docs if args.word_strings else [vocabulary.ids(d) for d in docs]
        profile = Profile.synthetic(rng, held[: args.own_jobs], count, args.neighbours)
        drmm_p50, drmm_p95 = percentiles(
            partial(rerank, model, vocabulary, query, held, config.histograms.bins, profile),
            args.repeats,
        )
        wmd_p50, wmd_p95 = percentiles(partial(wmd.score, frame), args.wmd_repeats)
        print(
            f"{count:>6}{drmm_p50:>13.2f}{drmm_p95:>9.2f}{wmd_p50:>12.1f}{wmd_p95:>9.1f}"
            f"{wmd_p50 / drmm_p50:>9.0f}x"
        )
    print("target: 100 jobs in under 5 ms p50 (issue 21)")


if __name__ == "__main__":
    main()
