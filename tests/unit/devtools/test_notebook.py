"""Notebook parameters: Databricks widgets become the command line a local run takes."""

from __future__ import annotations

from jobrec_core.devtools.notebook import Parameter, widget_arguments


def test_widgets_become_the_arguments_of_a_local_run():
    candidate = Parameter("candidate", "", "candidate id")
    values = {
        "env": "databricks",
        "conf_dir": "../conf",
        "set": "data.preset=demo\n  evaluation.k=5 ;spark.shuffle_partitions=64\n",
        "candidate": "17",
    }
    assert widget_arguments(values, (candidate,)) == [
        "--env",
        "databricks",
        "--conf-dir",
        "../conf",
        "--set",
        "data.preset=demo",
        "--set",
        "evaluation.k=5",
        "--set",
        "spark.shuffle_partitions=64",
        "--candidate",
        "17",
    ]
