"""jobrec: job recommendations from candidates' interests (BM25 retrieval, DRMM re-ranking)."""

__version__ = "0.1.0"
