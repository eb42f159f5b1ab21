"""Stage 1a: word2vec embeddings and IDF of the job ads."""
