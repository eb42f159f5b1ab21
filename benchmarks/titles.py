"""Titles normalised per second on CPU: the Siamese BiLSTM normaliser against seed 001's
trigram matcher, on the same titles and the same taxonomy, in one run.

    .venv/bin/python benchmarks/titles.py
    .venv/bin/python benchmarks/titles.py --titles 20000 --set titles.layers=4

The taxonomy is the normaliser's side of O*NET (`taxonomy.titles`, about 19,500 titles); the
titles are the real ads' titles, repeated to `--titles`. The subject embeds each title
(`TitleEncoder.embed`, batches sorted by length) and looks up its occupation, as
`TitleNormaliser.normalise` does in Spark's workers, with two lookups: seed 001's (the nearest
taxonomy vector) and the dearest that training may choose (`Lookup`: a share of the trigram
cosine, a vote of the ten nearest titles, the edit distances of the shortlisted titles
within the widest spelling budget). The taxonomy's own vectors are computed once
beforehand, as the registered model stores them. The weights do not change the cost, so the
encoder is freshly initialised from conf/. One thread is one Spark task's share; all threads
is one process with the machine to itself.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jobrec_scoring  # noqa: F401  (first: pins numpy's and torch's CPU code paths)

# isort: split

import torch

from jobrec_core.config import load_config
from jobrec_core.taxonomy.onet import load_catalogue
from jobrec_core.taxonomy.real_ads import real_ad_titles
from jobrec_core.taxonomy.titles import split_titles
from jobrec_core.titles.stage import encoder_spec
from jobrec_scoring.titles import Lookup, TitleEncoder, TitleNormaliser, canonical
from jobrec_scoring.trigrams import TrigramMatcher

REPO = Path(__file__).resolve().parents[1]


def rate(count: int, run) -> float:
    started = time.perf_counter()
    run()
    return count / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--titles", type=int, default=20000)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_config("local", args.overrides, REPO / "conf")
    real_titles = real_ad_titles(config.data.reference_dir)
    catalogue = load_catalogue(config.data.reference_dir)
    split = split_titles(catalogue, real_titles, config.titles.split_seed)
    codes = [o.code for o in catalogue.occupations]
    titles = (real_titles * (args.titles // len(real_titles) + 1))[: args.titles]
    torch.manual_seed(0)
    normaliser = TitleNormaliser.of(
        TitleEncoder(encoder_spec(config)),
        [t.text for t in split.normaliser],
        [codes[t.occupation] for t in split.normaliser],
    )
    matcher = TrigramMatcher(normaliser.titles)
    texts = [canonical(t, config.titles.max_chars) for t in titles]
    threads = torch.get_num_threads()
    spec = config.titles
    print(
        f"title normalisation: {len(titles):,} real-ad titles against {len(split.normaliser):,} "
        f"taxonomy titles; encoder {spec.layers} x {spec.hidden} BiLSTM, {threads} threads"
    )
    figures = [
        ("baseline: trigram matcher (seed 001)", rate(len(texts), lambda: matcher.nearest(texts)))
    ]
    dearest = Lookup(
        trigram_weight=max(spec.lookup_trigram_weights),
        neighbours=spec.lookup_neighbours,
        temperature=max(spec.lookup_temperatures),
        spelling=max(spec.lookup_spelling),
    )
    for name, subject in (
        ("nearest", normaliser),
        ("trigrams + vote + spelling", normaliser.with_lookup(dearest)),
    ):
        for count in (1, threads):
            torch.set_num_threads(count)
            figures.append(
                (
                    f"subject: Siamese BiLSTM, {name}, {count} thread(s)",
                    rate(len(titles), lambda subject=subject: subject.normalise(titles)),
                )
            )
    for name, per_second in figures:
        print(
            f"  {name:<58}{per_second:>10,.0f} titles/s"
            f"  {per_second / figures[0][1]:>6.2f}x baseline"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
