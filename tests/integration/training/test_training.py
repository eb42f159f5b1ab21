"""Stage 4 on the tiny preset: Petastorm-fed DDP training, checkpoints, MLflow, promotion.

All real: TorchDistributor and torchrun start real processes (gloo), Petastorm reads the
Delta snapshot's Parquet files, MLflow writes to the session's sqlite store and registry.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import psutil
import pytest
import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from jobrec_core.config import JobrecConfig
from jobrec_core.models.drmm import spec_from_config
from jobrec_core.models.model_io import save_model
from jobrec_core.models.registry import (
    EMBEDDINGS_TAG,
    SPLIT_RULE_TAG,
    NoChampionError,
    input_example,
    load_champion,
    log_drmm,
)
from jobrec_core.models.splits import current_split_rule
from jobrec_core.platform import manifest
from jobrec_core.platform.tables import read_delta, snapshot_files
from jobrec_core.platform.tracking import configure_mlflow, registry_client
from jobrec_core.serving.stage import served_ranker
from jobrec_core.training import batches
from jobrec_core.training.batches import (
    ReaderSettings,
    TripleStream,
    loader,
    training_batches,
)
from jobrec_core.training.plan import TrainPlan
from jobrec_core.training.promotion import GateFiles, _champion_moved, promote
from jobrec_core.training.stage import (
    gate_files,
    make_plan,
    run_training,
    run_tuning,
    training_inputs,
)
from jobrec_core.training.tuning import best_trial
from jobrec_core.training.worker import result_file, torchrun_command, write_plan
from jobrec_scoring.model import load_model, score_frame
from jobrec_scoring.network import Drmm

pytestmark = pytest.mark.integration


def with_training(config: JobrecConfig, **settings) -> JobrecConfig:
    return config.model_copy(update={"training": config.training.model_copy(update=settings)})


@pytest.fixture(scope="module")
def trained(spark, tiny, tiny_pairs):
    config = with_training(tiny[0], launcher="distributor", num_processes=2, max_epochs=3)
    return config, run_training(spark, config, fresh=True)


def test_triples_stream_from_the_current_snapshot_only(spark, tiny, tiny_pairs):
    config = tiny[0]
    entry = manifest.current(config, "pairs")
    files = snapshot_files(spark, entry["triples"], "train")
    expected = read_delta(spark, entry["triples"]).where("split = 'train'").count()
    spec = spec_from_config(config, config.embeddings.vector_size)
    streamed = [len(b) for b in loader(TripleStream(ReaderSettings(tuple(files), 16), spec))]
    assert sum(streamed) == expected == entry["splits"]["train"]
    # Two shards split the rows between them, without overlap or loss.
    halves = [
        sum(
            len(b)
            for b in loader(TripleStream(ReaderSettings(tuple(files), 16, shard=s, shards=2), spec))
        )
        for s in (0, 1)
    ]
    assert sum(halves) == expected and min(halves) > 0


def test_pool_pairs_stream_as_whole_lists_for_the_listwise_loss(spark, tiny, tiny_pairs):
    """`lists`: the stored pool pairs reach each process shuffled and batched as whole
    training lists (the held-out job against its drawn pool jobs), every pair once over two
    shards, and no list in two batches or two shards."""
    config = tiny[0]
    entry = manifest.current(config, "pairs")
    files = tuple(snapshot_files(spark, entry["pool_triples"], "pool_train"))
    stored = read_delta(spark, entry["pool_triples"]).where("split = 'pool_train'")
    expected = {(r[0], r[1]): r[2] for r in stored.groupBy(*batches.LIST_KEY).count().collect()}
    assert len(expected) > 1 and max(expected.values()) > 1
    spec = spec_from_config(config, config.embeddings.vector_size)
    seen: dict[tuple[int, int], int] = {}
    for shard in (0, 1):
        settings = ReaderSettings(files, 8, shuffle=True, seed=5, shard=shard, shards=2, lists=True)
        stream = TripleStream(settings, spec)
        read = batches.stream_columns(settings, stream.columns())
        for columns in batches.rebatch(read, settings):
            keys = list(zip(*(columns[c].tolist() for c in batches.LIST_KEY), strict=True))
            for key in dict.fromkeys(keys):
                assert key not in seen  # not in another batch or shard
                seen[key] = keys.count(key)
            decoded = stream.decode(columns)
            assert decoded.lists is not None and len(decoded.lists) == len(decoded)
    assert seen == expected


def test_loader_workers_share_the_rows_in_a_fixed_order(spark, tiny, tiny_pairs):
    """`training.decode_workers`: worker processes read and decode disjoint shares of the
    triples, every triple once, and the same order on every run."""
    config = tiny[0]
    files = tuple(snapshot_files(spark, manifest.current(config, "pairs")["triples"], "train"))
    spec = spec_from_config(config, config.embeddings.vector_size)
    settings = ReaderSettings(files, 16, shuffle=True, seed=3)

    def rows(workers: int) -> list[tuple[float, float]]:
        """Each triple as (its positive's, its negative's histogram sum), in streamed order;
        summed in float64 and rounded, since a float32 sum's last bits depend on the batch
        it was summed in."""
        return [
            (round(float(p), 6), round(float(n), 6))
            for batch in loader(TripleStream(settings, spec), workers)
            for p, n in zip(
                batch.positive.hist.double().sum(dim=(1, 2)),
                batch.negative.hist.double().sum(dim=(1, 2)),
                strict=True,
            )
        ]

    alone, shared, shared_again = rows(0), rows(2), rows(2)
    assert sorted(shared) == sorted(alone) and len(alone) > 16
    assert shared == shared_again


def test_training_batches_as_stored_counts_equal_the_hosts_decoding(spark, tiny, tiny_pairs):
    """What a GPU's training reads (`stored_counts`: int16 counts copied, the variant made on
    the device) equals the host-decoded batches, tensor for tensor, through loader workers
    too; on a CPU the host decodes, as before."""
    config = tiny[0]
    files = tuple(snapshot_files(spark, manifest.current(config, "pairs")["triples"], "train"))
    spec = spec_from_config(config, config.embeddings.vector_size)
    stream = TripleStream(ReaderSettings(files, 16, shuffle=True, seed=3), spec)
    cpu = torch.device("cpu")

    def assert_same(first: list, second: list) -> None:
        assert len(first) == len(second) > 1
        for (size, inputs, _), (other_size, other, _) in zip(first, second, strict=True):
            assert size == other_size
            for mine, theirs in zip(inputs.tensors(), other.tensors(), strict=True):
                torch.testing.assert_close(mine, theirs, rtol=0, atol=0)

    for workers in (0, 2):
        host = list(training_batches(stream, workers, cpu, stored_counts=False))
        assert_same(list(training_batches(stream, workers, cpu)), host)
        assert_same(list(training_batches(stream, workers, cpu, stored_counts=True)), host)


def test_evaluation_sets_are_decoded_once_and_kept(spark, tiny, tiny_pairs, monkeypatch):
    """An evaluation stream (`keep_in_memory`) decodes its files on the first pass only; the
    batches it keeps equal a fresh read's, a change of model spec decodes anew, and a set over
    the memory limit is streamed every time."""
    config = tiny[0]
    files = tuple(snapshot_files(spark, manifest.current(config, "pairs")["triples"], "dev"))
    spec = spec_from_config(config, config.embeddings.vector_size)
    kept = ReaderSettings(files, 16, keep_in_memory=True)
    first, second = (list(loader(TripleStream(kept, spec))) for _ in range(2))
    assert first and all(a is b for a, b in zip(first, second, strict=True))
    fresh = list(loader(TripleStream(ReaderSettings(files, 16), spec)))
    for was_kept, read in zip(second, fresh, strict=True):
        for side in ("positive", "negative"):
            for a, b in zip(
                getattr(was_kept, side).tensors(), getattr(read, side).tensors(), strict=True
            ):
                assert torch.equal(a, b)
    other = list(loader(TripleStream(kept, replace(spec, histogram="ch"))))
    assert other[0] is not first[0]
    assert not torch.equal(other[0].positive.hist, first[0].positive.hist)
    # A set over the limit is streamed, and not collected again on the next pass.
    batches.release_kept()
    monkeypatch.setattr(batches, "KEEP_LIMIT_BYTES", 1)
    streamed, streamed_again = (list(loader(TripleStream(kept, spec))) for _ in range(2))
    assert len(streamed) == len(first) and streamed[0] is not streamed_again[0]
    assert not batches._kept and batches._too_large
    batches.release_kept()


def test_distributor_trains_logs_and_registers(trained):
    config, outcome = trained
    result = outcome.result
    assert result.world_size == 2
    assert 1 <= len(result.history) <= 3
    kept = result.selected_record()  # the weights saved are those of the best dev epoch
    assert kept.dev_log_rank == max(r.dev_log_rank for r in result.history)
    assert "kept epoch" in result.stop_reasons[1]
    assert all(r.triples > 0 for r in result.history)
    client = MlflowClient(config.mlflow.tracking_uri)
    run = client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["model.mlp_layers"] == "10"
    assert run.data.tags["embeddings_version"] == manifest.current(config, "embeddings")["version"]
    assert run.data.tags["pairs_config_hash"] == manifest.current(config, "pairs")["config_hash"]
    for metric in (
        "train_accuracy",
        "dev_accuracy",
        "dev_map",
        "dev_held_out_mrr",
        "dev_held_out_log_rank",
        "train_loss",
    ):
        history = client.get_metric_history(outcome.run_id, metric)
        assert [m.step for m in history] == list(range(1, len(result.history) + 1))
    artifacts = {a.path for a in client.list_artifacts(outcome.run_id)}
    assert {"learning_curve.png", "training_result.json", "manifest.json"} <= artifacts
    assert outcome.version is not None
    assert manifest.current(config, "model")["version"] == outcome.version


def test_registered_model_loads_by_version_and_scores_stored_rows(spark, trained):
    config, outcome = trained
    configure_mlflow(config)
    uri = f"models:/{config.mlflow.model_name}/{outcome.version}"
    pyfunc = mlflow.pyfunc.load_model(uri)
    assert pyfunc.metadata.signature is not None
    rows: pd.DataFrame = (
        read_delta(spark, manifest.current(config, "pairs")["map_sets"])
        .where("split = 'map_test'")
        .limit(50)
    ).toPandas()
    scores = np.asarray(pyfunc.predict(rows[["query_idf", "hist", "doc_len"]]))
    assert scores.shape == (len(rows),)
    np.testing.assert_allclose(
        scores, score_frame(load_model(outcome.result.model_file), rows), rtol=1e-6
    )


def test_training_twice_on_the_same_data_gives_the_same_model_and_metrics(spark, trained):
    """Reproducible from the seed: a second fresh run of the same configuration (2 DDP
    processes, Petastorm shards, shuffled batches) repeats every epoch's figures exactly."""
    config, first = trained
    # Read before the second run, which trains into the same checkpoint folder.
    first_model = load_model(first.result.model_file).state_dict()
    again = run_training(spark, config, fresh=True)
    timings = {"seconds", "train_seconds"}

    def figures(outcome):
        return [
            {k: v for k, v in asdict(r).items() if k not in timings} for r in outcome.result.history
        ]

    assert figures(again) == figures(first)
    again_model = load_model(again.result.model_file).state_dict()
    for name, tensor in first_model.items():
        assert torch.equal(again_model[name], tensor), name


def test_a_killed_torchrun_resumes_from_its_checkpoint(spark, tiny, tiny_pairs, tmp_path):
    """Two failures, one outcome: a torchrun killed whole and launched again, and one whose
    worker dies and whose agent restarts every process (`training.max_restarts`), both resume
    from the last checkpoint and end with the uninterrupted run's epochs and weights."""
    config = with_training(tiny[0], max_epochs=3, early_stop_patience=10)
    spec = spec_from_config(config, config.embeddings.vector_size)
    inputs = training_inputs(spark, config)
    restarts = config.training.max_restarts
    assert restarts >= 1

    def launch(plan_path: Path, log_name: str) -> subprocess.Popen:
        log_path = plan_path.parent / log_name
        with log_path.open("ab") as log_file:  # the child keeps its own descriptor
            return subprocess.Popen(
                torchrun_command(plan_path, 2, restarts),
                start_new_session=True,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )

    def torchrun(directory: Path) -> subprocess.Popen:
        plan_path = write_plan(make_plan(config, spec, inputs, str(directory)), directory)
        return launch(plan_path, "torchrun.log")

    def finished(process: subprocess.Popen, log_path: Path) -> None:
        code = process.wait(timeout=300)
        assert code == 0, f"torchrun exited {code}:\n{log_path.read_text()[-6000:]}"

    def first_checkpoint(process: subprocess.Popen, directory: Path) -> None:
        deadline = time.monotonic() + 300
        while not list(directory.glob("epoch-001-0001.pt")):
            assert process.poll() is None, "the run ended before its first checkpoint was seen"
            assert time.monotonic() < deadline
            time.sleep(0.01)  # an epoch of the tiny preset takes about a second

    def result(directory: Path) -> dict:
        return json.loads(result_file(directory / "plan.json").read_text())

    whole = torchrun(tmp_path / "whole")
    finished(whole, tmp_path / "whole" / "torchrun.log")
    before = result(tmp_path / "whole")

    killed = torchrun(tmp_path / "killed")
    first_checkpoint(killed, tmp_path / "killed")
    os.killpg(killed.pid, signal.SIGKILL)  # the agent and its workers
    killed.wait(timeout=60)
    assert not (tmp_path / "killed" / "model.pt").exists()
    resumed = launch(tmp_path / "killed" / "plan.json", "resumed.log")
    finished(resumed, tmp_path / "killed" / "resumed.log")

    restarted = torchrun(tmp_path / "restarted")
    first_checkpoint(restarted, tmp_path / "restarted")
    workers = psutil.Process(restarted.pid).children()
    assert len(workers) == 2
    workers[-1].kill()  # one worker only: the agent stops the other and starts both again
    finished(restarted, tmp_path / "restarted" / "torchrun.log")

    whole_model = torch.load(before["model_file"], weights_only=False)["model"]
    for directory in ("killed", "restarted"):
        after = result(tmp_path / directory)
        assert after["resumed_from"] is not None, directory
        assert [r["epoch"] for r in after["history"]] == [1, 2, 3]
        for one, other in zip(after["history"], before["history"], strict=True):
            assert one["train_loss"] == pytest.approx(other["train_loss"], rel=1e-9)
            assert one["dev_accuracy"] == other["dev_accuracy"]
        after_model = torch.load(after["model_file"], weights_only=False)["model"]
        for name, tensor in whole_model.items():
            torch.testing.assert_close(after_model[name], tensor)


def test_a_two_phase_model_takes_phase_1_from_the_finished_run_it_would_repeat(
    spark, tiny, tiny_pairs
):
    """The seed's v3 is v1 plus a last layer that phase 1 leaves frozen: after v1 has been
    trained on the same data with the same settings, v3 starts at phase 2 from v1's
    checkpoints, and ends with the very weights and epochs that training phase 1 again gives."""
    base = with_training(tiny[0], launcher="single", max_epochs=2, early_stop_patience=10)
    base = base.model_copy(
        update={"mlflow": base.mlflow.model_copy(update={"model_name": "jobrec_drmm_phase1"})}
    )

    def version(name: str) -> JobrecConfig:
        return base.model_copy(update={"model": base.model.model_copy(update={"version": name})})

    def epochs(outcome) -> list[tuple]:
        return [(r.phase, r.epoch, r.train_loss, r.dev_mrr) for r in outcome.result.history]

    single = run_training(spark, version("v1"), fresh=True)
    reused = run_training(spark, version("v3"))
    reused_weights = load_model(reused.result.model_file).state_dict()
    again = run_training(spark, version("v3"), fresh=True)  # --fresh: phase 1 trained again
    assert reused.result.phase1_from == single.checkpoint_dir
    assert "phase 1 taken from" in reused.format() and reused.result.resumed_from is None
    assert again.result.phase1_from is None
    assert epochs(reused)[:2] == epochs(single) == epochs(again)[:2]
    assert epochs(reused) == epochs(again) and {r.phase for r in again.result.history} == {1, 2}
    again_weights = load_model(again.result.model_file).state_dict()
    assert set(reused_weights) == set(again_weights)
    for name, tensor in again_weights.items():
        assert torch.equal(reused_weights[name], tensor), name
    logged = MlflowClient().get_metric_history(reused.run_id, "dev_held_out_mrr")
    assert [m.step for m in logged] == [1, 2, 3, 4]  # phase 1's epochs logged to its run too


def register(
    config: JobrecConfig,
    model,
    spark,
    status: str = "FINISHED",
    embeddings: str | None = None,
    split_rule: str | None = None,
) -> str:
    """Log and register `model` in a run that ends with `status` (tagged with the embeddings
    version and split rule it was trained on, if given, as training runs are)."""
    configure_mlflow(config)
    directory = Path(config.storage.root) / "scratch-models"
    file = directory / f"model-{time.monotonic_ns()}.pt"
    save_model(model, file)
    rows = read_delta(spark, manifest.current(config, "pairs")["map_sets"]).limit(2).toPandas()
    with mlflow.start_run() as run:
        if embeddings is not None:
            mlflow.set_tag(EMBEDDINGS_TAG, embeddings)
        if split_rule is not None:
            mlflow.set_tag(SPLIT_RULE_TAG, split_rule)
        version = log_drmm(model, file, input_example(rows, model), config.mlflow.model_name)
    if status != "FINISHED":
        MlflowClient(config.mlflow.tracking_uri).set_terminated(run.info.run_id, status)
    assert version is not None
    return version


def linear_model(config: JobrecConfig, weights: dict[str, float]) -> Drmm:
    """A DRMM whose score is a weighted sum of log1p of its extra features, whatever the
    histograms say: `{"bm25": 1.0}` orders as BM25 does, `{"bm25": -1.0}` in reverse."""
    spec = spec_from_config(config, config.embeddings.vector_size)
    extras = tuple(weights)
    model = Drmm(replace(spec, extras=extras, extras_keep=1.0, phase2_keep={}))
    assert model.combine is not None
    with torch.no_grad():
        model.combine.weight.copy_(torch.tensor([[0.0, *weights.values()]]))
    return model


def open_gate(spark, trained) -> tuple[JobrecConfig, MlflowClient, GateFiles]:
    """The trained configuration without the accuracy floor, its registry and its test files:
    what the promotion tests decide with."""
    config = trained[0].model_copy(
        update={
            "promotion": trained[0].promotion.model_copy(
                update={"min_gain_over_retriever": float("-inf")}
            )
        }
    )
    return config, registry_client(config), gate_files(spark, config)


def test_promotion_gate_in_both_directions(spark, trained):
    """On the real registry: without a champion, a model must beat BM25's own order of the
    test pools (BM25's order itself does not, nor its reverse), and a better one becomes
    champion; a challenger significantly better in the held-out log rank replaces a
    champion; one that is not (the same weights, registered again) is refused with the
    figures; a failed run never passes."""
    config, client, files = open_gate(spark, trained)
    name = config.mlflow.model_name
    assert files.held_out

    bm25_like = linear_model(config, {"bm25": 1.0})
    reversed_bm25 = linear_model(config, {"bm25": -1.0})
    worse = register(config, reversed_bm25, spark)
    first = promote(config, worse, files)
    assert not first.promoted and first.champion is None, first.format()
    assert first.reason.startswith("significantly worse")
    assert "over BM25's order of the pools (no champion yet)" in first.reason
    as_bm25 = promote(config, register(config, bm25_like, spark), files)
    assert not as_bm25.promoted and as_bm25.reason.startswith("no significant difference")
    # The BM25-like model orders each pool as the stored BM25 ranks do.
    assert as_bm25.challenger.mrr == pytest.approx(as_bm25.bm25_mrr, abs=0.02)
    assert as_bm25.challenger.log_rank == pytest.approx(as_bm25.bm25_log_rank, abs=0.05)
    assert "BM25 order" in as_bm25.format()
    with pytest.raises(MlflowException):
        client.get_model_version_by_alias(name, "champion")

    # (The tiny preset's 24 test candidates are too few for any model to beat BM25's order
    # significantly: the unit tests show a first model that does become champion.) An
    # operator sets the champion by hand, here to the reversed model: challengers face it.
    client.set_registered_model_alias(name, config.mlflow.champion_alias, worse)
    better = register(config, bm25_like, spark)
    second = promote(config, better, files)
    assert second.promoted, second.format()
    assert second.reason.startswith("significantly better")
    assert f"over champion version {worse}" in second.reason
    assert second.verdict.gain is not None and second.verdict.gain.low > 0
    assert second.champion is not None and second.champion.version == worse
    assert str(client.get_model_version_by_alias(name, "champion").version) == better
    tags = client.get_model_version(name, better).tags
    assert tags["promotion.decision"] == "promoted"
    assert float(tags["promotion.gain_ci_low"]) > 0
    champion_mrr = float(tags["promotion.champion_test_held_out_mrr"])
    assert champion_mrr == pytest.approx(first.challenger.mrr, abs=1e-6)
    champion_log_rank = float(tags["promotion.champion_test_held_out_log_rank"])
    assert champion_log_rank == pytest.approx(first.challenger.log_rank, abs=1e-6)

    same = register(config, bm25_like, spark)
    third = promote(config, same, files)
    assert not third.promoted
    assert "not promoted: no significant difference" in third.format()
    assert third.verdict.gain is not None and third.verdict.gain.mean == 0.0
    assert str(client.get_model_version_by_alias(name, "champion").version) == better
    assert str(client.get_model_version_by_alias(name, "challenger").version) == same
    assert client.get_model_version(name, same).tags["promotion.decision"] == "rejected"

    # A model as good as the champion, but from a run that failed, never becomes champion.
    failed = register(config, bm25_like, spark, status="FAILED")
    fourth = promote(config, failed, files)
    assert not fourth.promoted and "FAILED" in fourth.reason
    assert str(client.get_model_version_by_alias(name, "champion").version) == better


def test_a_champion_on_other_embeddings_faces_bm25s_order_instead(spark, trained):
    """New jobs give new embeddings, and a champion trained on the old ones can no longer be
    served or evaluated: a challenger on the current embeddings is compared with BM25's
    order, as a first model is, and until one passes, recommendations serve the retriever's
    own order; with a champion on the current embeddings the usual gate applies."""
    config, client, files = open_gate(spark, trained)
    name = config.mlflow.model_name
    current = str(manifest.current(config, "embeddings")["version"])
    model = linear_model(config, {"bm25": 1.0})
    stale = register(config, model, spark, embeddings="w2v-older")
    client.set_registered_model_alias(name, config.mlflow.champion_alias, stale)

    fresh = register(config, model, spark, embeddings=current)
    refused = promote(config, fresh, files)
    assert not refused.promoted and refused.champion is None, refused.format()
    assert refused.reason.startswith("no significant difference")
    assert "over BM25's order of the pools" in refused.reason
    assert f"the champion version {stale} was trained on embeddings w2v-older" in refused.reason
    with pytest.raises(NoChampionError, match="w2v-older"):
        load_champion(config)
    served = served_ranker(None, config)
    assert served.label == f"{config.retrieval.retriever} order (no champion)"

    client.set_registered_model_alias(name, config.mlflow.champion_alias, fresh)
    assert load_champion(config).version == fresh
    again = register(config, model, spark, embeddings=current)
    same = promote(config, again, files)
    assert not same.promoted and same.reason.startswith("no significant difference")
    assert f"over champion version {fresh}" in same.reason
    assert str(client.get_model_version_by_alias(name, "champion").version) == fresh

    # A challenger trained on older embeddings could not be served: it is not even compared.
    older = promote(config, register(config, model, spark, embeddings="w2v-older"), files)
    assert not older.promoted and older.reason.startswith("not comparable"), older.format()
    assert "trained on embeddings w2v-older" in older.reason
    assert str(client.get_model_version_by_alias(name, "champion").version) == fresh


def test_a_champion_trained_under_another_split_rule_faces_bm25s_order_instead(spark, trained):
    """Pairs rebuilt under another split rule (another seed, other shares) may put the
    champion's training candidates among the test candidates: it is not compared with, the
    evaluation does not measure it, and a challenger trained under another rule is not even
    compared; serving still serves it."""
    config, client, files = open_gate(spark, trained)
    name = config.mlflow.model_name
    rule = current_split_rule(config).fingerprint
    model = linear_model(config, {"bm25": 1.0})
    older = register(config, model, spark, split_rule="splits-older")
    client.set_registered_model_alias(name, config.mlflow.champion_alias, older)

    fresh = promote(config, register(config, model, spark, split_rule=rule), files)
    assert not fresh.promoted and fresh.champion is None, fresh.format()
    assert "over BM25's order of the pools" in fresh.reason
    assert f"the champion version {older} was trained on split rule splits-older" in fresh.reason
    with pytest.raises(NoChampionError, match="splits-older"):
        load_champion(config, splits=rule)
    assert load_champion(config).version == older  # serving

    refused = promote(config, register(config, model, spark, split_rule="splits-older"), files)
    assert not refused.promoted and refused.reason.startswith("not comparable"), refused.format()
    assert f"trained on split rule splits-older, the current one is {rule}" in refused.reason


def test_the_alias_moves_only_while_it_names_the_champion_the_gate_compared_with(spark, trained):
    """Two gates at once (the pipeline's and a manual one): the later move must not replace
    a champion its challenger was never compared with."""
    config, client, _ = open_gate(spark, trained)
    name, alias = config.mlflow.model_name, config.mlflow.champion_alias
    model = linear_model(config, {"bm25": 1.0})
    compared, meanwhile = register(config, model, spark), register(config, model, spark)
    client.set_registered_model_alias(name, alias, compared)
    compared_version = client.get_model_version(name, compared)
    assert _champion_moved(client, name, alias, compared_version) is None
    client.set_registered_model_alias(name, alias, meanwhile)  # the other gate promoted
    moved = _champion_moved(client, name, alias, compared_version)
    assert moved is not None and f"moved from version {compared} to {meanwhile}" in moved


def test_the_floor_rejects_a_model_below_it(spark, trained):
    config, outcome = trained
    strict = config.model_copy(
        update={"promotion": config.promotion.model_copy(update={"min_gain_over_retriever": 9.0})}
    )
    decision = promote(strict, str(outcome.version), gate_files(spark, config))
    assert not decision.promoted and "floor" in decision.reason


def test_tuning_trains_each_trial_and_logs_the_choice(spark, tiny, tiny_pairs):
    base = with_training(tiny[0], launcher="single", max_epochs=2)
    trials = [
        ((f"training.learning_rate={rate}",), with_training(base, learning_rate=rate))
        for rate in (0.001, 0.01)
    ]
    measured = run_tuning(spark, trials)
    assert [t.overrides for t in measured] == [overrides for overrides, _ in trials]
    assert all(0 < t.dev_mrr <= 1 and t.dev_log_rank <= 0 for t in measured)
    assert all(1 <= t.epochs <= 2 for t in measured)
    configure_mlflow(base)
    [run] = mlflow.search_runs(filter_string="tags.stage = 'tune_drmm'", output_format="list")
    assert run.data.tags["chosen"] == " ".join(best_trial(measured).overrides)


def test_plan_survives_json(spark, tiny, tiny_pairs, tmp_path):
    config = tiny[0]
    spec = spec_from_config(config, config.embeddings.vector_size)
    plan = make_plan(config, spec, training_inputs(spark, config), str(tmp_path))
    assert TrainPlan(**json.loads(json.dumps(asdict(plan)))) == plan


def test_embedding_gating_trains_saves_its_vectors_and_scores_from_words(spark, tiny, tiny_pairs):
    config = with_training(tiny[0], launcher="single", max_epochs=1)
    config = config.model_copy(
        update={"model": config.model.model_copy(update={"gating": "embedding"})}
    )
    outcome = run_training(spark, config, fresh=True)
    model = load_model(outcome.result.model_file)
    assert model.query_vectors is not None
    assert model.spec.gate_dim == config.embeddings.vector_size == model.query_vectors.dim
    configure_mlflow(config)
    pyfunc = mlflow.pyfunc.load_model(f"models:/{config.mlflow.model_name}/{outcome.version}")
    rows: pd.DataFrame = (
        read_delta(spark, manifest.current(config, "pairs")["map_sets"]).limit(20)
    ).toPandas()
    scores = np.asarray(pyfunc.predict(rows[["query_idf", "query_terms", "hist", "doc_len"]]))
    np.testing.assert_allclose(scores, score_frame(model, rows), rtol=1e-6)
    # The words matter: the same rows with their words unknown score differently.
    unknown = rows.assign(query_terms=rows["query_terms"].map(lambda t: [f"x{w}" for w in t]))
    assert not np.allclose(score_frame(model, unknown), scores)


@pytest.mark.parametrize(
    ("version", "launcher"),
    [
        ("v6", "distributor"),
        ("v7", "single"),
        ("v8", "single"),
        ("v9", "single"),
        ("v11", "distributor"),
    ],
)
def test_pool_versions_train_on_pool_pairs_and_score_with_the_profile_features(
    spark, tiny, tiny_pairs, version, launcher
):
    config = with_training(tiny[0], launcher=launcher, num_processes=2, max_epochs=1)
    config = config.model_copy(
        update={"model": config.model.model_copy(update={"version": version})}
    )
    spec = spec_from_config(config, config.embeddings.vector_size)
    inputs = training_inputs(spark, config)
    plan = make_plan(config, spec, inputs, "unused")
    assert plan.train_files == inputs.files["pool"] and plan.train_files != inputs.files["train"]
    outcome = run_training(spark, config, fresh=True)
    model = load_model(outcome.result.model_file)
    assert model.spec.architecture == spec.architecture and "co_interest" in model.spec.extras
    configure_mlflow(config)
    pyfunc = mlflow.pyfunc.load_model(f"models:/{config.mlflow.model_name}/{outcome.version}")
    rows: pd.DataFrame = (
        read_delta(spark, manifest.current(config, "pairs")["held_out"]).limit(20)
    ).toPandas()
    scores = np.asarray(pyfunc.predict(rows[pyfunc.metadata.get_input_schema().input_names()]))
    np.testing.assert_allclose(scores, score_frame(model, rows), rtol=1e-6)
    # the mix with BM25 was chosen on dev and travels in the spec; the run logged it
    logged = mlflow.get_run(outcome.run_id).data.metrics["dev_bm25_alpha"]
    assert model.spec.bm25_alpha == logged and 0.0 <= logged <= 1.0
    if version == "v11":  # a softmax over each training list
        assert plan.loss == "listwise" and outcome.result.history[0].train_loss > 0
    if version == "v8":  # the gate reads each term's share of the candidate's jobs
        assert model.spec.gate_share and model.gate is not None and model.gate.in_features == 2
        assert "query_job_share" in pyfunc.metadata.get_input_schema().input_names()
    if version == "v9":  # the title's matches apart from the other fields'
        assert model.spec.field_histograms and model.term_mlp[0].in_features == 2 * (
            config.histograms.bins + 1
        )
        assert "lead_hist" in pyfunc.metadata.get_input_schema().input_names()


# Run by the served model's processes: the project's source folder leaves `sys.path`, and the
# packages only the pipeline needs cannot be imported, so the model must load from what it
# was logged with (its `code/` folder and its pip requirements).
PROJECT_FREE_SITE = """
import os, sys
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != {libs!r}]
BLOCKED = {blocked!r}

class RefuseProjectOnlyPackages:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}} is not available to the served model")
        return None

sys.meta_path.insert(0, RefuseProjectOnlyPackages())
"""
PIPELINE_ONLY = ("jobrec_core", "pyspark", "delta", "petastorm", "gensim", "ot", "faiss")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_champion_serves_over_http_without_the_project(trained, tmp_path):
    """`mlflow models serve` (local env manager) on the registered champion, in processes
    that cannot import the project or the pipeline's packages, answers the logged input
    example with the scores the model gives in-process."""
    import urllib.request

    from mlflow.models import Model

    config, outcome = trained
    name, alias = config.mlflow.model_name, config.mlflow.champion_alias
    registry_client(config).set_registered_model_alias(name, alias, str(outcome.version))
    uri = f"models:/{name}@{alias}"
    configure_mlflow(config)
    local = Path(mlflow.artifacts.download_artifacts(uri, dst_path=str(tmp_path / "model")))
    assert (local / "code" / "jobrec_scoring" / "model.py").is_file()
    example = Model.load(str(local)).load_input_example(str(local))
    expected = np.asarray(mlflow.pyfunc.load_model(uri).predict(example))

    site = tmp_path / "site"
    site.mkdir()
    libs = os.path.realpath(Path(__file__).parents[3] / "libs")
    (site / "sitecustomize.py").write_text(
        PROJECT_FREE_SITE.format(libs=libs, blocked=PIPELINE_ONLY)
    )
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        # the local env manager runs this environment's `uvicorn`
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "MLFLOW_TRACKING_URI": config.mlflow.tracking_uri,
        "MLFLOW_REGISTRY_URI": config.mlflow.registry_uri or config.mlflow.tracking_uri,
    }
    command = ["mlflow", "models", "serve", "-m", uri]
    command += ["--env-manager", "local", "--host", "127.0.0.1", "--port", str(port)]
    log_file = tmp_path / "serve.log"
    with log_file.open("w") as log:
        server = subprocess.Popen(
            command,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            executable=str(Path(sys.executable).with_name("mlflow")),
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, log_file.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{base}/ping", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log_file.read_text()[-3000:]
            time.sleep(0.5)
        request = urllib.request.Request(
            f"{base}/invocations",
            data=(local / "serving_input_example.json").read_bytes(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            served = np.asarray(json.loads(answer.read())["predictions"], dtype=np.float64)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited on its own
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    np.testing.assert_allclose(served, expected, rtol=1e-6)
