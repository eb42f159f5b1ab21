"""Text and word vectors: tokens and stop words, the one word-vector loader, Word Mover's Distance
and its transport solver."""
