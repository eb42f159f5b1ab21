"""File paths Python can open, without Spark: what a training worker or a served model needs
on a machine that has no Spark at all (a plain `torchrun` on a GPU node)."""

from __future__ import annotations


def local_path(location: str) -> str:
    """A path Python's file functions can open: `dbfs:/x` is `/dbfs/x` on Databricks, but a
    Unity Catalog volume's files (`dbfs:/Volumes/...`, as Spark qualifies a `/Volumes/...`
    table's files) are at `/Volumes/...`, where the cluster mounts volumes."""
    if location.startswith("dbfs:/Volumes/"):
        return location[len("dbfs:") :]
    if location.startswith("dbfs:/"):
        return "/dbfs/" + location[len("dbfs:/") :].lstrip("/")
    if location.startswith("file:"):
        return location[len("file:") :]
    return location
