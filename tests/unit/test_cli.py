import sys

import pytest

from jobrec_core import cli, runtime
from jobrec_core.cli import _run_command, build_parser
from jobrec_core.entrypoints import generate_data, tune_drmm


def test_the_report_names_the_run_as_typed_without_the_steering_options():
    args = build_parser().parse_args(
        ["run", "--env", "local", "--env", "seed", "--candidates", "10000", "--from", "evaluate",
         "--set", "evaluation.models=[v1, v5]"]
    )  # fmt: skip
    assert _run_command(args) == (
        "jobrec run --env local --env seed --set 'evaluation.models=[v1, v5]' --candidates 10000"
    )
    assert _run_command(build_parser().parse_args(["run", "--preset", "tiny"])) == (
        "jobrec run --env local --preset tiny"
    )


def test_the_preset_applies_without_repeating_itself_in_the_reproduce_line(monkeypatch):
    ran = []

    def run(config, args) -> int:
        ran.append((config, args))
        return 0

    monkeypatch.setattr(cli, "setup_logging", lambda: None)
    monkeypatch.setattr(cli, "_run", run)
    assert cli.main(["run", "--preset", "tiny", "--set", "run.seed=7"]) == 0
    ((config, args),) = ran
    assert (config.data.preset, config.run.seed) == ("tiny", 7)
    assert _run_command(args) == "jobrec run --env local --set run.seed=7 --preset tiny"


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        (generate_data, ["--set", "nonsense.key=1"]),
        (tune_drmm, ["--grid", "training.nonsense=1,2"]),  # a trial's configuration
    ],
)
def test_a_job_tells_a_configuration_mistake_as_jobrec_does(monkeypatch, capsys, module, argv):
    monkeypatch.setattr(runtime, "setup_logging", lambda: None)
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    with pytest.raises(SystemExit) as failed:
        runtime.entry_point(module.main)()
    assert failed.value.code == 2
    message = capsys.readouterr().err
    assert message.startswith(f"{module.__name__.rpartition('.')[2]}: invalid configuration:")
    assert "unknown key" in message and "Traceback" not in message
