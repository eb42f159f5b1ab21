from jobrec_core.cli import _run_command, build_parser


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
