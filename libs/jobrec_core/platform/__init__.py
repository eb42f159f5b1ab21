"""Shared infrastructure every stage uses: Spark sessions, Delta tables, the manifest, quarantine,
MLflow tracking, charts."""
