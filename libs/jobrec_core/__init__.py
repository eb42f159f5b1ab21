"""jobrec: job recommendations from candidates' interests (BM25 retrieval, DRMM re-ranking)."""

# First of all: pins the numeric libraries' CPU code path (jobrec_scoring.numerics) before
# any of them computes, in every process that imports the project.
import jobrec_scoring  # noqa: F401

__version__ = "0.1.0"
