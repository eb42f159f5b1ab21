"""Text cleaning exactly as the seed: lowercase, no numbers, no punctuation, no stop words.

Everything downstream (word2vec, WMD, query bags of words, the Elasticsearch index, the
matching histograms) sees words produced by :func:`clean_tokens`, so a term means the same
thing at every stage.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from pyspark.ml.feature import RegexTokenizer, StopWordsRemover
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# Runs of letters in any script. Digits, underscores and punctuation separate words, so
# "c++/java" gives "c" and "java", and "you're" gives "you" and "re".
_WORD = re.compile(r"[^\W\d_]+")


@lru_cache(maxsize=8)
def load_stopwords(languages: tuple[str, ...] = ("english", "greek")) -> frozenset[str]:
    """The stop-word lists shipped in `jobrec_core/resources/stopwords/`, merged."""
    words: set[str] = set()
    folder = Path(__file__).resolve().parents[1] / "resources" / "stopwords"
    for language in languages:
        resource = folder / f"{language}.txt"
        if not resource.is_file():
            raise ValueError(f"no stop-word list for {language!r} in {folder}")
        words.update(line.strip() for line in resource.read_text("utf-8").splitlines())
    words.discard("")
    # The lists spell contractions with apostrophes; cleaned text never contains them.
    return frozenset(word for word in words if _WORD.fullmatch(word))


def clean_tokens(text: str | None, stopwords: frozenset[str]) -> list[str]:
    """The words of `text`, lowercased, in order, without numbers, punctuation or stop words."""
    if not text:
        return []
    return [word for word in _WORD.findall(text.lower()) if word not in stopwords]


def clean_text(text: str | None, stopwords: frozenset[str]) -> str:
    """:func:`clean_tokens` joined by single spaces (what the search index stores)."""
    return " ".join(clean_tokens(text, stopwords))


def unique_in_order(words: Iterable[str]) -> list[str]:
    """Each word once, at its first position."""
    return list(dict.fromkeys(words))


JOB_TEXT_FIELDS = ("title", "function", "requirement_summary", "description", "keywords")


LETTER_RUNS = (
    r"(?U)[^\W\d_]+"  # letters of any script (Unicode classes), as jobrec_core.text.tokens
)


def tokens_column(field: str) -> str:
    return f"{field}_tokens"


def tokenize_jobs(jobs: DataFrame, stopwords: frozenset[str]) -> DataFrame:
    """Adds `<field>_tokens` (array of cleaned words) for every text field of the jobs."""
    frame = jobs.withColumn("_keywords_text", F.concat_ws(" ", "keywords"))
    for field in JOB_TEXT_FIELDS:
        source = "_keywords_text" if field == "keywords" else field
        raw = f"_{field}_raw"
        frame = RegexTokenizer(
            inputCol=source, outputCol=raw, pattern=LETTER_RUNS, gaps=False, toLowercase=True
        ).transform(frame.fillna("", subset=[source]))
        frame = (
            StopWordsRemover(
                inputCol=raw,
                outputCol=tokens_column(field),
                stopWords=sorted(stopwords),
                caseSensitive=True,
            )
            .transform(frame)
            .drop(raw)
        )
    return frame.drop("_keywords_text")
