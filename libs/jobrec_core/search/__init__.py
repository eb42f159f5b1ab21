"""Elasticsearch, shared by indexing, pairs and serving: connections, the local node, BM25
retrieval."""
