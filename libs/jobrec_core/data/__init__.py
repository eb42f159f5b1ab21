"""Stage 0: the reference data, the generator, ingestion into bronze/silver Delta tables, the data
report."""
