"""The training key names what changes the trained weights: checkpoints under one key are
reused, so anything that would keep another epoch or other weights must change it, and
anything that only changes how the run is launched must not."""

from dataclasses import replace

import pytest

from jobrec_core.config import load_config
from jobrec_core.training import stage
from jobrec_core.training.stage import TrainingInputs, training_key
from jobrec_scoring.network import DrmmSpec

SPEC = DrmmSpec(bins=30, histogram="lch", mlp_layers=3, mlp_width=8, gating="idf", gate_dim=1)
INPUTS = TrainingInputs(
    triples="triples",
    map_sets="map_sets",
    files={},
    versions={"pairs": "3", "embeddings": "1"},
    vectors_file="vectors.kv",
    tables=(),
)


def key(*overrides: str) -> str:
    return training_key(load_config("local", list(overrides), None), SPEC, INPUTS)


def test_the_measure_that_selects_the_epoch_is_part_of_the_key(monkeypatch):
    selected_on_log_rank = key()
    monkeypatch.setattr(stage, "EPOCH_SELECTION", "held-out MRR")
    assert key() != selected_on_log_rank


def test_the_rules_of_steps_and_phases_are_part_of_the_key(monkeypatch):
    two_phase = replace(SPEC, extras=("bm25",), two_phase=True)
    before = key(), training_key(load_config("local", [], None), two_phase, INPUTS)
    monkeypatch.setattr(stage, "STEP_RULE", "join()")
    monkeypatch.setattr(stage, "PHASE_RULE", "phase 2 always")
    after = key(), training_key(load_config("local", [], None), two_phase, INPUTS)
    assert before[0] != after[0] and before[1] != after[1]
    assert key("training.launcher=single") == key("training.launcher=single", "run.seed=20180101")


@pytest.mark.parametrize(
    "override", ["training.learning_rate=0.001", "training.early_stop_patience=5", "run.seed=7"]
)
def test_settings_of_the_weights_change_the_key(override):
    assert key(override) != key()


@pytest.mark.parametrize(
    "override",
    [
        "training.num_processes=1",
        "training.launcher=single",
        "training.use_gpu=true",
        "training.decode_workers=2",
    ],
)
def test_what_shards_orders_or_rounds_the_batches_changes_the_key(override):
    """A run killed and relaunched on another number of processes, loader processes or
    device would resume checkpoints it would not have written itself."""
    assert key(override) != key()


def test_the_launcher_itself_keeps_the_key():
    assert key("training.launcher=torchrun") == key()


def test_other_data_changes_the_key():
    other = replace(INPUTS, versions={"pairs": "4", "embeddings": "1"})
    assert training_key(load_config("local", [], None), SPEC, other) != key()
