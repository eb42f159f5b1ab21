"""Query and document features shared by the pairs stage and the ranking pipeline: the query bag of
words, matching histograms."""
