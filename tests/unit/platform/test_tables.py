import pytest

from jobrec_core.platform.paths import local_path


@pytest.mark.parametrize(
    ("location", "path"),
    [
        # A Unity Catalog volume: Spark qualifies `/Volumes/...` files with the dbfs scheme,
        # and the cluster mounts volumes at /Volumes (not under /dbfs).
        (
            "dbfs:/Volumes/jobrec_prod/ml/jobrec/seed/silver/t",
            "/Volumes/jobrec_prod/ml/jobrec/seed/silver/t",
        ),
        ("/Volumes/jobrec_prod/ml/jobrec/seed", "/Volumes/jobrec_prod/ml/jobrec/seed"),
        ("dbfs:/jobrec/seed", "/dbfs/jobrec/seed"),
        ("file:/tmp/jobrec", "/tmp/jobrec"),
        (".jobrec/seed", ".jobrec/seed"),
    ],
)
def test_local_path_is_what_python_file_functions_open(location, path):
    assert local_path(location) == path
