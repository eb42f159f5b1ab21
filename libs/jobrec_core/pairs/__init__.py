"""Stage 3: queries, BM25 retrieval, (q, d+, d-) triples and MAP sets with DRMM features."""
