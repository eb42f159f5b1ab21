"""The runtime list's parsing and the check's verdict (pip's own resolution is exercised by
tests/integration/devtools/test_runtime_wheel.py)."""

import pytest

from jobrec_core.devtools.runtime_check import (
    RUNTIME_LIST,
    Change,
    RuntimeCheck,
    canonical,
    runtime_libraries,
)


def test_the_committed_runtime_list_names_every_protected_library():
    libraries = runtime_libraries(RUNTIME_LIST)
    assert {"numpy", "pandas", "pyarrow", "torch", "pyspark", "mlflow-skinny"} <= set(libraries)
    assert libraries["pyspark"].startswith("3.5.")


def test_names_are_normalised_and_bad_lines_refused(tmp_path):
    listing = tmp_path / "runtime.txt"
    listing.write_text("# comment\nPyYAML==6.0.1  # trailing\n\nmlflow_skinny==2.21.3\n")
    assert runtime_libraries(listing) == {"pyyaml": "6.0.1", "mlflow-skinny": "2.21.3"}
    assert canonical("Foo.Bar_baz") == "foo-bar-baz"
    listing.write_text("numpy>=1.26\n")
    with pytest.raises(ValueError, match=r"runtime\.txt:1: expected name==version"):
        runtime_libraries(listing)


def test_the_verdict_fails_only_on_protected_libraries():
    added = Change("gensim", None, "4.4.0")
    assert RuntimeCheck((added,), ()).passed
    moved = Change("pandas", "1.5.3", "2.2.3")
    check = RuntimeCheck((added, moved), (moved,))
    assert not check.passed
    assert "PROTECTED LIBRARIES CHANGE: pandas: 1.5.3 -> 2.2.3" in check.format()
    assert "added    gensim 4.4.0" in check.format()
