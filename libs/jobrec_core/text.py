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

# Runs of letters in any script. Digits, underscores and punctuation separate words, so
# "c++/java" gives "c" and "java", and "you're" gives "you" and "re".
_WORD = re.compile(r"[^\W\d_]+")


@lru_cache(maxsize=8)
def load_stopwords(languages: tuple[str, ...] = ("english", "greek")) -> frozenset[str]:
    """The stop-word lists shipped in `jobrec_core/resources/stopwords/`, merged."""
    words: set[str] = set()
    folder = Path(__file__).parent / "resources" / "stopwords"
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
