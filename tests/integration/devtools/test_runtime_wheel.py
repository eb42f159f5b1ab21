"""pip, asked for real (PyPI for the wheel's dependencies), whether installing the wheel on
Databricks Runtime 16.4 LTS ML would change a library the runtime must keep."""

import pytest

from jobrec_core.devtools.runtime_check import RUNTIME_LIST, check_runtime

pytestmark = pytest.mark.integration


def test_the_wheel_leaves_the_runtimes_libraries_alone():
    result = check_runtime()
    assert result.passed, result.format()
    added = {change.name for change in result.changes}
    assert {"gensim", "pot", "faiss-cpu", "elasticsearch"} <= added  # what the runtime lacks
    assert all(change.runtime is None for change in result.changes), result.format()


def test_a_runtime_the_wheel_does_not_fit_is_reported(tmp_path):
    older = tmp_path / "older-runtime.txt"
    older.write_text(RUNTIME_LIST.read_text().replace("pandas==1.5.3", "pandas==1.4.4"))
    result = check_runtime(older)
    assert not result.passed
    [pandas] = result.protected
    assert pandas.name == "pandas" and pandas.runtime == "1.4.4"
    assert "PROTECTED LIBRARIES CHANGE: pandas: 1.4.4 ->" in result.format()
