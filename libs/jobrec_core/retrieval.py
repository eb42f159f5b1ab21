"""BM25 retrieval from the `jobs` alias: the seed's query (Figure 3) and how it is sent.

The query is a `bool/should` around one `multi_match` of type `most_fields` over the five
indexed fields with the seed's boosts: a term matching in several fields scores in each of
them, which is how the seed ranks a job whose title, function and keywords all agree.
"""

from __future__ import annotations

from typing import Any

from jobrec_core.config import RetrievalConfig


def multi_match_query(text: str, settings: RetrievalConfig) -> dict[str, Any]:
    """The seed's query for a bag of words given as one space-separated string."""
    return {
        "bool": {
            "should": [
                {
                    "multi_match": {
                        "query": text,
                        "type": settings.type,
                        "fields": [f"{name}^{boost:g}" for name, boost in settings.boosts.items()],
                        "auto_generate_synonyms_phrase_query": (
                            settings.auto_generate_synonyms_phrase_query
                        ),
                    }
                }
            ]
        }
    }
