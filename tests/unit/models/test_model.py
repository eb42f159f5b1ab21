"""DRMM network, batches and metrics: pure torch / numpy, no Spark."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from jobrec_core.models.drmm import (
    hinge_loss,
    listwise_loss,
    phases,
    set_phase,
    training_loss,
)
from jobrec_core.ranking.metrics import (
    average_precision_at_k,
    mean_average_precision,
    pairwise_accuracy,
    rank_within_queries,
)
from jobrec_core.training.batches import ReaderSettings, list_index, rebatch, row_share
from jobrec_core.training.promotion import PromotionDecision, Scores, decide, gate_alpha
from jobrec_core.training.scoring import SplitScores
from jobrec_core.training.worker import best_epoch, epoch_batch_size, should_stop
from jobrec_scoring.inputs import document_inputs, pad_queries, query_gate, to_bytes
from jobrec_scoring.network import Drmm, DrmmInputs, DrmmSpec

BINS = 30


def spec(**overrides: Any) -> DrmmSpec:
    values: dict[str, Any] = dict(
        bins=BINS, histogram="lch", mlp_layers=3, mlp_width=8, gating="idf", gate_dim=1
    )
    values.update(overrides)
    return DrmmSpec(**values)


def inputs(batch: int, terms: list[int], extras: int = 0, seed: int = 0) -> DrmmInputs:
    """Random inputs with queries of the given lengths, padded to the longest."""
    generator = torch.Generator().manual_seed(seed)
    longest = max(terms)
    mask = torch.arange(longest)[None, :] < torch.tensor(terms)[:, None]
    return DrmmInputs(
        hist=torch.rand(batch, longest, BINS + 1, generator=generator),
        mask=mask,
        gate=torch.rand(batch, longest, 1, generator=generator) * 5,
        extras=torch.rand(batch, extras, generator=generator) * 10,
    )


def test_scores_one_value_per_pair_for_every_configuration():
    for extras in ((), ("unigrams", "bigrams", "bm25")):
        model = Drmm(spec(extras=extras, extras_keep=0.3)).eval()
        scores = model.score(inputs(4, [3, 1, 5, 2], extras=len(extras)))
        assert scores.shape == (4,)
        assert torch.isfinite(scores).all()


def test_padded_query_terms_change_nothing():
    model = Drmm(spec()).eval()
    batch = inputs(3, [2, 4, 1])
    noisy = DrmmInputs(
        batch.hist.masked_fill(~batch.mask[:, :, None], 7.0),
        batch.mask,
        batch.gate.masked_fill(~batch.mask[:, :, None], -3.0),
        batch.extras,
    )
    torch.testing.assert_close(model.score(batch), model.score(noisy))
    # The same query alone, without padding, scores the same.
    alone = DrmmInputs(batch.hist[2:, :1], batch.mask[2:, :1], batch.gate[2:, :1], batch.extras[2:])
    torch.testing.assert_close(model.score(alone), model.score(batch)[2:])


@pytest.mark.parametrize("architecture", ["drmm", "tks", "knrm"])
def test_packed_and_padded_term_encoding_score_and_learn_alike(architecture):
    """The GPU runs the term encoders over every padded position (no host sync), the CPU
    over the real terms alone: the scores and the gradients must not depend on which."""
    batch = inputs(3, [2, 5, 1], extras=2)
    outcomes = []
    for packed in (True, False):
        torch.manual_seed(0)
        model = Drmm(spec(architecture=architecture, extras=("bm25", "unigrams"))).eval()
        model.pack_terms = packed
        scores = model.score(batch)
        scores.sum().backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        outcomes.append((scores.detach(), grads))
    torch.testing.assert_close(outcomes[0][0], outcomes[1][0])
    for packed_grad, padded_grad in zip(outcomes[0][1], outcomes[1][1], strict=True):
        torch.testing.assert_close(packed_grad, padded_grad)


@pytest.mark.parametrize("architecture", ["drmm", "tks", "knrm"])
def test_scoring_without_gradients_computes_what_training_computes(architecture):
    """Scores (no gradients, CPU) run the term MLP on the transposed rows, training through
    `nn.Linear`: the same function, float32 sums in another order."""
    model = Drmm(spec(architecture=architecture, mlp_layers=10, mlp_width=10)).eval()
    batch = inputs(8, [3, 40, 7, 1, 25, 12, 9, 30])
    with torch.inference_mode():
        scored = model.score(batch)
    trained = model.score(batch).detach()
    torch.testing.assert_close(scored, trained, rtol=1e-4, atol=1e-5)


def test_a_query_without_terms_scores_zero_not_nan():
    model = Drmm(spec()).eval()
    batch = inputs(2, [3, 3])
    batch.mask[1] = False
    assert model.score(batch)[1].item() == 0.0


def test_embedding_gating_takes_a_vector_per_term():
    model = Drmm(spec(gating="embedding", gate_dim=5)).eval()
    batch = inputs(2, [2, 3])
    batch.gate = torch.rand(2, 3, 5)
    assert model.score(batch).shape == (2,)


def test_training_steps_reduce_the_loss_on_a_separable_set():
    torch.manual_seed(0)
    model = Drmm(spec())
    positive, negative = inputs(64, [3] * 64, seed=1), inputs(64, [3] * 64, seed=2)
    positive.hist[:, :, BINS] += 2.0  # exact matches: the relevant documents
    negative.gate = positive.gate
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def loss() -> torch.Tensor:
        return hinge_loss(model.score(positive), model.score(negative), 1.0)

    before = loss().item()
    for _ in range(60):
        optimizer.zero_grad()
        value = loss()
        value.backward()
        optimizer.step()
    assert loss().item() < 0.2 * before
    assert (
        pairwise_accuracy(
            model.score(positive).detach().numpy(), model.score(negative).detach().numpy()
        )
        == 1.0
    )


def test_two_phase_training_freezes_the_right_parameters():
    torch.manual_seed(0)
    model = Drmm(spec(extras=("bigrams", "bm25"), two_phase=True, phase2_keep={"bm25": 0.2}))
    assert phases(model.spec) == (1, 2)
    positive, negative = (
        inputs(16, [2] * 16, extras=2, seed=3),
        inputs(16, [2] * 16, extras=2, seed=4),
    )
    last = {name for name, _ in model.combine.named_parameters(prefix="combine")}  # type: ignore[union-attr]

    def step_and_changed() -> set[str]:
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
        optimizer.zero_grad()
        hinge_loss(model.score(positive), model.score(negative), 1.0).backward()
        optimizer.step()
        return {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}

    set_phase(model, 1)
    changed = step_and_changed()
    assert changed and not changed & last
    set_phase(model, 2)
    # The bias gets no gradient from a pairwise loss (it cancels in s(d+) - s(d-)).
    assert step_and_changed() == {"combine.weight"}
    # Phase 2 drops BM25 with its own keep probability (0.2), the bigrams not at all.
    torch.testing.assert_close(model.keep_phase2, torch.tensor([1.0, 0.2]))


def test_the_last_layer_starts_as_the_document_score_alone():
    model = Drmm(spec(extras=("bm25",))).eval()
    batch = inputs(3, [2, 2, 2], extras=1)
    without = Drmm(spec()).eval()
    without.load_state_dict(model.state_dict(), strict=False)
    torch.testing.assert_close(model.score(batch), without.score(batch))


def test_spec_round_trips_through_json_values():
    original = spec(extras=("unigrams",), two_phase=True, phase2_keep={"unigrams": 0.5})
    assert DrmmSpec.from_dict(original.to_dict()) == original


@pytest.mark.parametrize(
    ("scores", "min_gain", "best", "stop"),
    [
        ([0.3], 0.0, 0, False),
        ([0.3, 0.2, 0.25], 0.0, 0, False),  # two epochs without a gain: patience is 3
        ([0.3, 0.2, 0.25, 0.29], 0.0, 0, True),
        ([0.3, 0.2, 0.25, 0.31], 0.0, 3, False),
        ([0.3, 0.2, 0.25, 0.31], 0.02, 0, True),  # 0.31 is not 0.02 better than 0.3
        ([0.3, 0.3, 0.3, 0.3], 0.0, 0, True),  # equal is no gain: the earliest is kept
        # an epoch measured as NaN is beaten by any number, and beats none
        ([float("nan"), 0.2, 0.25, 0.3], 0.0, 3, False),
        ([0.3, float("nan"), 0.25, 0.29], 0.0, 0, True),
    ],
)
def test_early_stopping_keeps_the_best_epoch_and_waits_for_patience(scores, min_gain, best, stop):
    assert best_epoch(scores, min_gain) == best
    assert should_stop(scores, 3, min_gain) is stop


@pytest.mark.parametrize(
    ("rows", "min_steps", "world", "expected"),
    [
        (24_270, 200, 2, 32),  # the demo's pool pairs: full batches, 380 steps a process
        (11_507, 200, 2, 28),  # 28 rows: 206 steps a process, 32 would give 180
        (1_248, 200, 2, 3),  # the tiny preset: 208 steps, not 20
        (1_248, 200, 1, 6),
        (150, 200, 2, 1),  # never under one row: as many steps as there are rows
        (1_248, 0, 2, 32),  # the paper's configurations: the batch as configured
    ],
)
def test_small_training_sets_take_smaller_batches_for_enough_steps(
    rows, min_steps, world, expected
):
    size = epoch_batch_size(rows, 32, min_steps, world)
    assert size == expected
    if min_steps and size > 1:
        assert -(-rows // (size * world)) >= min_steps


# --- batches ---------------------------------------------------------------------------------


def test_ragged_histograms_pad_into_a_mask():
    rows = [np.arange(2 * 3, dtype=np.int16), np.zeros(0, dtype=np.int16), np.ones(3, np.int16)]
    blobs = np.array([r.tobytes() for r in rows], dtype=object)
    padded, mask = pad_queries(blobs, np.int16, 3)
    assert padded.shape == (3, 2, 3)
    assert mask.tolist() == [[True, True], [False, False], [True, False]]
    assert padded[0].ravel().tolist() == list(range(6))
    assert padded[2, 0].tolist() == [1, 1, 1] and not padded[2, 1].any()


def test_rows_of_values_decode_as_their_bytes_do():
    """`pad_queries` reads a list column as it is (scoring) or its bytes (training): the same
    padded values and mask, ragged or not; the padding is writable either way."""
    for lengths in ([2, 0, 1], [2, 2, 2]):
        rows = [np.arange(3 * n, dtype=np.int16) + 7 * k for k, n in enumerate(lengths)]
        blobs = np.array([r.tobytes() for r in rows], dtype=object)
        from_bytes, bytes_mask = pad_queries(blobs, np.int16, 3)
        for values in (rows, [r.tolist() for r in rows]):
            padded, mask = pad_queries(np.array(values, dtype=object), np.int16, 3)
            assert padded.dtype == np.int16 and padded.flags.writeable
            np.testing.assert_array_equal(padded, from_bytes)
            np.testing.assert_array_equal(mask, bytes_mask)
        assert from_bytes.flags.writeable  # `frombuffer` alone would be read-only
    empty, mask = pad_queries(np.array([], dtype=object), np.float32, 1)
    assert empty.shape == (0, 0, 1) and mask.shape == (0, 0)


def test_score_frame_reads_list_columns_as_the_training_batches_read_bytes():
    """The pyfunc's input (list columns) scores as the bytes the training reader decodes."""
    import pandas as pd

    from jobrec_scoring.model import input_columns, score_frame
    from jobrec_scoring.vectors import QueryVectors

    rng = np.random.default_rng(4)
    terms = [3, 3, 1, 0, 3]
    frame = pd.DataFrame(
        {
            "query_idf": [rng.uniform(1, 5, n).astype(np.float32) for n in terms],
            "query_terms": [["c", "a", "zz"][:n] for n in terms],
            "hist": [rng.integers(0, 9, n * (BINS + 1)).astype(np.int16) for n in terms],
            "doc_len": [40, 12, 7, 0, 90],
            "bm25": rng.uniform(0, 20, 5).astype(np.float32),
        }
    )
    for model in (
        Drmm(spec(extras=("bm25",))),
        Drmm(spec(gating="embedding", gate_dim=3)),
    ):
        if model.spec.gating == "embedding":
            model.query_vectors = QueryVectors.of([b"a", b"b", b"c"], np.eye(3))
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.randn_like(parameter))
        model.eval()
        selected = frame[input_columns(model)].copy()
        columns = {c: np.asarray(v) for c, v in to_bytes(selected).items()}
        gate, mask = query_gate(columns, model.spec, model.query_vectors)
        with torch.no_grad():
            expected = model.score(document_inputs(columns, "", model.spec, gate, mask)).numpy()
        # padded to the longest query (3 terms) above, each query alone in `score_frame`
        scored = score_frame(model, frame)
        np.testing.assert_allclose(scored, expected, rtol=1e-5, atol=1e-6)
        # a row's score depends on its own query's rows alone, not on the others in the frame
        for rows in ([0], [1], [2, 3], [4], [4, 0, 2]):
            np.testing.assert_array_equal(score_frame(model, frame.iloc[rows]), scored[rows])


def test_list_columns_become_bytes_of_the_right_type():
    import pandas as pd

    frame = to_bytes(pd.DataFrame({"query_idf": [[1.5, 2.0]], "hist": [[1, 2]], "doc_len": [3]}))
    assert np.frombuffer(frame["query_idf"][0], np.float32).tolist() == [1.5, 2.0]
    assert np.frombuffer(frame["hist"][0], np.int16).tolist() == [1, 2]
    assert frame["doc_len"][0] == 3


def test_field_histograms_feed_the_lead_and_the_rest_side_by_side():
    """DRMM-fields: the term MLP reads transform(lead) then transform(hist - lead); without
    the option the lead histogram is not even read."""
    import pandas as pd

    hist = [[4, 0, 2, 1, 3, 0], [9, 9, 9, 9, 9, 9]]  # two rows of one 2-term query, 2 bins
    lead = [[1, 0, 2, 0, 0, 0], [0, 0, 0, 9, 0, 0]]
    frame = pd.DataFrame(
        {"query_idf": [[1.0, 2.0]] * 2, "hist": hist, "lead_hist": lead, "doc_len": [10, 54]}
    )
    fields = spec(bins=2, histogram="ch", field_histograms=True)
    columns = {c: np.asarray(v) for c, v in to_bytes(frame.copy()).items()}
    gate, mask = query_gate(columns, fields, None)
    both = document_inputs(columns, "", fields, gate, mask).hist
    counts = np.array(hist, dtype=np.float32).reshape(2, 2, 3)
    titles = np.array(lead, dtype=np.float32).reshape(2, 2, 3)
    np.testing.assert_array_equal(both.numpy(), np.concatenate([titles, counts - titles], 2))
    assert Drmm(fields).term_mlp[0].in_features == 6
    plain = spec(bins=2, histogram="ch")
    without_lead = {name: values for name, values in columns.items() if name != "lead_hist"}
    alone = document_inputs(without_lead, "", plain, gate, mask).hist
    np.testing.assert_array_equal(alone.numpy(), counts)
    assert Drmm(fields).eval().score(document_inputs(columns, "", fields, gate, mask)).shape == (2,)


@pytest.mark.parametrize("variant", ["ch", "nh", "lch"])
@pytest.mark.parametrize("fields", [False, True])
def test_ragged_histograms_decode_as_padding_then_the_variant_would(variant, fields):
    """The variant is computed on the stored values before padding (it maps a zero count to
    zero): every cell, padding included, equals padding the counts first."""
    import pandas as pd

    from jobrec_scoring.inputs import transform

    rng = np.random.default_rng(5)
    terms, width = [3, 0, 1, 2], BINS + 1
    hist = [rng.integers(0, 40, n * width).astype(np.int16) for n in terms]
    lead = [row // 2 for row in hist]
    frame = pd.DataFrame(
        {
            "query_idf": [np.ones(n, np.float32) for n in terms],
            "hist": hist,
            "lead_hist": lead,
            "doc_len": [40, 12, 0, 90],
        }
    )
    decoded_spec = spec(histogram=variant, field_histograms=fields)
    columns = {c: np.asarray(v) for c, v in to_bytes(frame).items()}
    gate, mask = query_gate(columns, decoded_spec, None)
    decoded = document_inputs(columns, "", decoded_spec, gate, mask).hist.numpy()
    counts, _ = pad_queries(columns["hist"], np.int16, width)
    lengths = frame["doc_len"].to_numpy()
    expected = transform(counts, lengths, variant)
    if fields:
        leads, _ = pad_queries(columns["lead_hist"], np.int16, width)
        expected = np.concatenate(
            [transform(leads, lengths, variant), transform(counts - leads, lengths, variant)], 2
        )
    assert decoded.dtype == np.float32 and decoded.flags.c_contiguous
    np.testing.assert_array_equal(decoded, expected.astype(np.float32))


@pytest.mark.parametrize("variant", ["ch", "lch"])
@pytest.mark.parametrize("fields", [False, True])
def test_stored_counts_become_the_variant_where_the_model_runs(variant, fields):
    """A GPU's batches travel as the stored int16 counts (half the bytes) and become the
    variant on the device: the same float32 values as the host's decoding, padding too."""
    import pandas as pd

    from jobrec_scoring.inputs import histogram_input

    rng = np.random.default_rng(7)
    terms, width = [2, 0, 3], BINS + 1
    hist = [rng.integers(0, 3000, n * width).astype(np.int16) for n in terms]
    frame = pd.DataFrame(
        {
            "query_idf": [np.ones(n, np.float32) for n in terms],
            "hist": hist,
            "lead_hist": [row // 3 for row in hist],
            "doc_len": [40, 12, 90],
        }
    )
    decoded_spec = spec(histogram=variant, field_histograms=fields)
    columns = {c: np.asarray(v) for c, v in to_bytes(frame).items()}
    gate, mask = query_gate(columns, decoded_spec, None)
    on_host = document_inputs(columns, "", decoded_spec, gate, mask)
    stored = document_inputs(columns, "", decoded_spec, gate, mask, stored_counts=True)
    assert stored.hist.dtype == torch.int16 and stored.hist.shape == on_host.hist.shape
    moved = histogram_input(stored, decoded_spec)
    assert moved.hist.dtype == torch.float32
    torch.testing.assert_close(moved.hist, on_host.hist, rtol=0, atol=0)
    assert histogram_input(on_host, decoded_spec) is on_host  # already the variant


def test_normalised_histograms_are_never_left_as_counts():
    """NH divides by each document's length, which the model's inputs do not carry."""
    import pandas as pd

    frame = pd.DataFrame({"query_idf": [[1.0]], "hist": [[1] * (BINS + 1)], "doc_len": [5]})
    columns = {c: np.asarray(v) for c, v in to_bytes(frame).items()}
    normalised = spec(histogram="nh")
    gate, mask = query_gate(columns, normalised, None)
    with pytest.raises(ValueError, match="document lengths"):
        document_inputs(columns, "", normalised, gate, mask, stored_counts=True)


def test_rebatch_keeps_every_row_once_and_shuffles_by_seed():
    groups = [{"x": np.arange(start, start + 10)} for start in range(0, 100, 10)]

    def batches(seed: int, shuffle: bool = True) -> list[np.ndarray]:
        settings = ReaderSettings(
            (), batch_size=16, shuffle=shuffle, seed=seed, shuffle_buffer_rows=35
        )
        return [b["x"] for b in rebatch(iter(groups), settings)]

    first = batches(1)
    assert sorted(np.concatenate(first).tolist()) == list(range(100))
    assert [len(b) for b in first][:-1] == [16] * (len(first) - 1)
    assert np.array_equal(np.concatenate(first), np.concatenate(batches(1)))
    assert not np.array_equal(np.concatenate(first), np.concatenate(batches(2)))
    assert np.concatenate(batches(0, shuffle=False)).tolist() == list(range(100))


def list_groups(sizes: list[int], start: int = 0) -> dict[str, np.ndarray]:
    """Pool-pair columns of lists of the given sizes, rows of a list adjacent; `x` numbers
    the rows."""
    candidate = np.repeat(np.arange(start, start + len(sizes)), sizes)
    return {
        "candidate_id": candidate.astype(np.int64),
        "pos_job_id": (candidate * 7 % 13).astype(np.int32),
        "x": np.arange(len(candidate)) + 1_000 * start,
    }


def test_rebatch_with_lists_batches_whole_shuffled_lists():
    """`lists`: each batch holds whole lists (at least `batch_size` rows of them, the last
    batch excepted), every row once, and the order of the lists follows the seed."""
    groups = [list_groups([3, 5, 1, 4], start) for start in range(0, 40, 4)]

    def batches(seed: int, shuffle: bool = True) -> list[dict[str, np.ndarray]]:
        settings = ReaderSettings(
            (), batch_size=8, shuffle=shuffle, seed=seed, shuffle_buffer_rows=30, lists=True
        )
        return list(rebatch(iter(groups), settings))

    first = batches(1)
    rows = np.concatenate([b["x"] for b in first])
    assert sorted(rows.tolist()) == sorted(np.concatenate([g["x"] for g in groups]).tolist())
    seen: set[int] = set()
    for batch in first:
        lists = list_index(batch)
        # a list's rows are adjacent, and no list appears in two batches
        assert (np.diff(lists) >= 0).all()
        owners = set(batch["candidate_id"].tolist())
        assert not owners & seen and len(owners) == lists[-1] + 1
        seen |= owners
    assert all(len(b["x"]) >= 8 for b in first[:-1])
    assert np.array_equal(rows, np.concatenate([b["x"] for b in batches(1)]))
    assert not np.array_equal(rows, np.concatenate([b["x"] for b in batches(2)]))
    unshuffled = np.concatenate([b["x"] for b in batches(0, shuffle=False)])
    assert unshuffled.tolist() == np.concatenate([g["x"] for g in groups]).tolist()


def test_row_shares_split_lists_between_shards_whole():
    columns = list_groups([3, 5, 1, 4, 2, 6, 2, 2])
    shares = [
        row_share(columns, ReaderSettings((), 8, shard=s, shards=2, lists=True)) for s in (0, 1)
    ]
    taken = [np.asarray(columns["x"])[share] for share in shares]
    assert sorted(np.concatenate(taken).tolist()) == columns["x"].tolist()
    owners = [set(columns["candidate_id"][share].tolist()) for share in shares]
    assert owners[0] and owners[1] and not owners[0] & owners[1]
    assert row_share(columns, ReaderSettings((), 8, shard=1, shards=2)) == slice(1, None, 2)


def test_listwise_loss_is_each_lists_softmax_cross_entropy():
    generator = torch.Generator().manual_seed(0)
    lists = torch.tensor([0, 0, 0, 1, 2, 2])
    positive = torch.randn(3, generator=generator)[lists]  # a list's rows share the positive
    negative = torch.randn(6, generator=generator) * 30  # far apart: the log-sum-exp is stable
    expected = torch.stack(
        [
            -torch.log_softmax(torch.cat([positive[lists == g][:1], negative[lists == g]]), 0)[0]
            for g in range(3)
        ]
    ).mean()
    assert torch.allclose(listwise_loss(positive, negative, lists), expected, atol=1e-5)
    assert torch.isfinite(listwise_loss(positive, negative, lists))
    # lists of one pair each: the pairwise logistic loss, log(1 + exp(s(d-) - s(d+)))
    single = torch.arange(6)
    pairwise = torch.nn.functional.softplus(negative / 30 - positive).mean()
    assert torch.allclose(listwise_loss(positive, negative / 30, single), pairwise)
    assert torch.allclose(
        training_loss("hinge", positive, negative, 1.0), hinge_loss(positive, negative, 1.0)
    )
    # list numbers with gaps (no triple in list 1) are the same lists
    gapped = torch.tensor([0, 0, 0, 2, 3, 3])
    assert torch.allclose(listwise_loss(positive, negative, gapped), expected, atol=1e-5)
    with pytest.raises(ValueError, match="lists"):
        training_loss("listwise", positive, negative, 1.0)


def test_listwise_gradient_goes_to_the_highest_scored_negatives():
    positive = torch.zeros(3, requires_grad=True)
    negative = torch.tensor([2.0, 0.0, -2.0], requires_grad=True)
    listwise_loss(positive, negative, torch.zeros(3, dtype=torch.long)).backward()
    assert negative.grad is not None and positive.grad is not None
    assert negative.grad[0] > negative.grad[1] > negative.grad[2] > 0
    assert torch.isclose(positive.grad.sum(), -negative.grad.sum())


# --- metrics ---------------------------------------------------------------------------------


def test_average_precision_at_k_by_hand():
    # One query, relevance in ranked order 1 0 1 0 0, three relevant in all, k = 3:
    # (1/1 + 2/3) / min(3, 3).
    ranked = rank_within_queries(
        np.zeros(5, dtype=int),
        np.array([5.0, 4, 3, 2, 1]),
        np.array([1, 0, 1, 0, 1]),
        np.arange(5),
    )
    assert average_precision_at_k(ranked, 3)[0] == pytest.approx((1 + 2 / 3) / 3)


def test_map_sorts_by_score_within_each_query_and_breaks_ties_by_document():
    query = np.array([7, 7, 7, 3, 3])
    score = np.array([0.1, 0.9, 0.5, 1.0, 1.0])
    label = np.array([1, 0, 0, 0, 1])
    document = np.array([1, 2, 3, 20, 10])
    # Query 7: ranks 2, 3, 1 -> the relevant one is third: AP@10 = (1/3) / 1.
    # Query 3: a tie; document 10 (relevant) first: AP = 1.
    assert mean_average_precision(query, score, label, document, 10) == pytest.approx(
        (1 / 3 + 1) / 2
    )


def test_queries_without_relevant_documents_have_zero_ap():
    ranked = rank_within_queries(np.zeros(3, int), np.arange(3.0), np.zeros(3, int), np.arange(3))
    assert average_precision_at_k(ranked, 10).tolist() == [0.0]


# --- the promotion gate ------------------------------------------------------------------------


NO_FLOOR = -np.inf  # `promotion.min_gain_over_retriever` where a test is not about the floor


def gate_scores(version: str, ln_ranks: np.ndarray, accuracy: float = 0.9) -> Scores:
    """A version whose held-out jobs ranked exp(`ln_ranks`) (ranks from 1)."""
    return Scores(version, SplitScores(accuracy, 0.8, ranks_of(ln_ranks)))


def ranks_of(ln_ranks: np.ndarray) -> np.ndarray:
    return np.exp(np.maximum(ln_ranks, 0.0))  # rank 1 at best


def test_promotion_gate_needs_a_significant_paired_gain_in_the_log_rank_over_the_champion():
    rng = np.random.default_rng(7)
    champion_ln_ranks = rng.uniform(1, np.log(100), 400)
    champion = gate_scores("4", champion_ln_ranks)
    bm25_ranks = ranks_of(rng.uniform(1, np.log(100), 400))

    def verdict(ln_ranks: np.ndarray, against: Scores | None = champion):
        return decide(gate_scores("5", ln_ranks), against, bm25_ranks, NO_FLOOR, 1000, 11)

    same = verdict(champion_ln_ranks + rng.normal(0, 0.4, 400))  # the same on average
    assert not same.promoted and same.reason.startswith("no significant difference")
    assert same.gain is not None and same.gain.low < 0 < same.gain.high
    better = verdict(champion_ln_ranks - 0.3 + rng.normal(0, 0.4, 400))
    assert better.promoted and better.reason.startswith("significantly better")
    assert better.gain is not None and better.gain.low > 0
    assert "over champion version 4" in better.reason and "ranks 1." in better.reason
    worse = verdict(champion_ln_ranks + 0.3)
    assert not worse.promoted and worse.reason.startswith("significantly worse")
    already = decide(gate_scores("4", champion_ln_ranks), champion, bm25_ranks, NO_FLOOR, 1000, 11)
    assert already.promoted and "already" in already.reason


def test_the_gate_counts_every_halving_of_the_rank_alike():
    """Half the champion's held-out jobs are 2nd, half 40th. The challenger lifts every 40th
    to 10th and drops 60 of the 2nd to 3rd: its MRR is lower, so a gate on the MRR would
    refuse it, but the held-out jobs rank higher overall and the log rank promotes it."""
    base = np.full(200, np.log(40.0))
    base[:100] = np.log(2.0)
    champion = gate_scores("4", base)
    lifted = base.copy()
    lifted[100:] = np.log(10.0)  # 40th -> 10th
    lifted[:60] = np.log(3.0)  # 2nd -> 3rd
    challenger = gate_scores("5", lifted)
    assert challenger.mrr < champion.mrr
    verdict = decide(challenger, champion, ranks_of(base), NO_FLOOR, 1000, 11)
    assert verdict.promoted and verdict.gain is not None and verdict.gain.low > 0


def test_the_decision_prints_the_log_rank_the_rank_it_stands_for_and_the_mrr():
    champion = gate_scores("4", np.full(10, np.log(4.0)))
    challenger = gate_scores("5", np.full(10, np.log(2.0)))
    verdict = decide(challenger, champion, ranks_of(np.full(10, np.log(8.0))), NO_FLOOR, 200, 1)
    decision = PromotionDecision("jobrec_drmm", challenger, champion, verdict, 0.125, -np.log(8))
    lines = decision.format().splitlines()
    assert lines[0].split() == ["version", "log-rank", "GM", "rank", "MRR", "accuracy", "MAP"]
    assert lines[1].split()[:5] == ["challenger", "5", f"{-np.log(2):.4f}", "2.00", "0.5000"]
    assert lines[2].split()[:5] == ["champion", "4", f"{-np.log(4):.4f}", "4.00", "0.2500"]
    assert lines[3].split() == ["BM25", "order", f"{-np.log(8):.4f}", "8.00", "0.1250"]
    assert "PROMOTED" in lines[4] and "ranks 2.00x higher" in lines[4]


def test_the_decision_names_the_configuration_each_registry_version_was_trained_as():
    """The registry numbers versions in training order, so version 6 may be configuration v5
    and version 5 v10: a message naming only "v5" would say the wrong one."""
    champion = replace(gate_scores("5", np.full(10, np.log(2.0))), configuration="v10")
    challenger = replace(gate_scores("6", np.full(10, np.log(2.0))), configuration="v5")
    verdict = decide(challenger, champion, ranks_of(np.full(10, np.log(8.0))), NO_FLOOR, 200, 1)
    decision = PromotionDecision("jobrec_drmm", challenger, champion, verdict)
    assert "over champion version 5 (v10)" in verdict.reason
    assert decision.format().splitlines()[-1].startswith("jobrec_drmm version 6 (v5): not promoted")


def test_the_first_model_must_beat_the_retrievers_own_order():
    """Without a champion, the challenger is paired against BM25's order of the same pools:
    as good as BM25 is not enough (it would add a model and nothing else), and the floor
    still applies."""
    rng = np.random.default_rng(3)
    bm25_ln_ranks = rng.uniform(1, np.log(100), 400)
    bm25_ranks = ranks_of(bm25_ln_ranks)

    def first(ln_ranks: np.ndarray, floor: float = NO_FLOOR):
        return decide(gate_scores("1", ln_ranks), None, bm25_ranks, floor, 1000, 11)

    as_bm25 = first(bm25_ln_ranks + rng.normal(0, 0.4, 400))
    assert not as_bm25.promoted and as_bm25.reason.startswith("no significant difference")
    assert "over BM25's order of the pools (no champion yet)" in as_bm25.reason
    below = first(bm25_ln_ranks + 0.3)
    assert not below.promoted and below.reason.startswith("significantly worse")
    above = bm25_ln_ranks - 0.3 + rng.normal(0, 0.4, 400)
    promoted = first(above)
    assert promoted.promoted and promoted.gain is not None and promoted.gain.low > 0
    floored = first(above, floor=0.5)  # gains about 0.3 on average
    assert not floored.promoted and floored.reason.startswith("below the floor"), floored.reason
    with pytest.raises(ValueError, match="different candidates"):
        first(above[:10])


def test_the_floor_holds_over_a_champion_and_reads_no_accuracy():
    """A challenger that beats a weak champion but ranks the held-out jobs worse than BM25's
    own order is not served; a poor accuracy on the paper's triples (which a model reading
    BM25 wins by construction) is no longer the floor."""
    rng = np.random.default_rng(9)
    bm25_ln_ranks = rng.uniform(1, np.log(100), 400)
    champion = gate_scores("4", bm25_ln_ranks + 0.6)
    challenger = gate_scores("5", bm25_ln_ranks + 0.3 + rng.normal(0, 0.2, 400), accuracy=0.1)
    floored = decide(challenger, champion, ranks_of(bm25_ln_ranks), 0.0, 1000, 11)
    assert not floored.promoted and floored.reason.startswith("below the floor"), floored.reason
    assert "over BM25's order of the pools < 0.0" in floored.reason
    passed = decide(challenger, champion, ranks_of(bm25_ln_ranks), NO_FLOOR, 1000, 11)
    assert passed.promoted, passed.reason


# --- embedding gating ------------------------------------------------------------------------


def test_query_vectors_look_up_words_in_any_script_and_zero_the_unknown():
    from jobrec_scoring.vectors import QueryVectors

    words = ["λογιστής", "nurse", "driver"]
    table = QueryVectors.of([w.encode() for w in words], np.array([[3.0, 4.0], [1, 0], [0, 2]]))
    found = table.lookup([b"driver", "λογιστής".encode(), b"unknown", b"nurse"])
    expected = np.array([[0, 1], [0.6, 0.8], [0, 0], [1, 0]], dtype=np.float32)
    np.testing.assert_allclose(found, expected, atol=1e-6)
    again = QueryVectors.from_state(table.to_state())
    np.testing.assert_allclose(again.lookup([b"nurse"]), [[1, 0]])


def test_embedding_gate_places_each_words_vector_at_its_term():
    import pandas as pd

    from jobrec_scoring.inputs import query_gate
    from jobrec_scoring.vectors import QueryVectors

    table = QueryVectors.of([b"a", b"b", b"c"], np.eye(3))
    frame = to_bytes(
        pd.DataFrame(
            {"query_idf": [[1.0, 1.0], [], [1.0]], "query_terms": [["c", "a"], [], ["zz"]]}
        )
    )
    columns = {c: np.asarray(v) for c, v in frame.items()}
    gate, mask = query_gate(columns, spec(gating="embedding", gate_dim=3), table)
    assert gate.shape == (3, 2, 3)
    assert mask.tolist() == [[True, True], [False, False], [True, False]]
    np.testing.assert_allclose(gate[0], [[0, 0, 1], [1, 0, 0]])
    assert not gate[1:].any()  # no terms, and an unknown word


def test_the_gate_reads_each_terms_share_of_the_candidates_jobs_as_one_more_channel():
    import pandas as pd

    from jobrec_scoring.inputs import query_columns, query_gate

    shared = spec(gate_share=True, gate_dim=2)
    assert query_columns(shared) == ["query_idf", "query_job_share"]
    frame = to_bytes(
        pd.DataFrame({"query_idf": [[2.0, 3.0], [4.0]], "query_job_share": [[1.0, 0.5], [0.25]]})
    )
    gate, mask = query_gate({c: np.asarray(v) for c, v in frame.items()}, shared, None)
    assert gate.shape == (2, 2, 2) and mask.tolist() == [[True, True], [True, False]]
    np.testing.assert_allclose(gate[0], [[2.0, 1.0], [3.0, 0.5]])
    np.testing.assert_allclose(gate[1], [[4.0, 0.25], [0.0, 0.0]])
    model = Drmm(shared)
    assert model.gate is not None and model.gate.in_features == 2


def test_tks_reads_the_highest_similarities_from_the_counts():
    from jobrec_scoring.network import top_similarities

    counts = torch.zeros(2, BINS + 1)
    counts[0, BINS] = 2  # two exact matches
    counts[0, BINS - 1] = 1  # one similarity in the highest bin
    counts[1, 0] = 1  # one similarity in the lowest bin
    top = top_similarities(counts, spec(architecture="tks", top_k=4))
    highest = 1.0 - 1.0 / BINS
    assert torch.allclose(top[0], torch.tensor([1.0, 1.0, highest, 0.0]))
    assert torch.allclose(top[1], torch.tensor([-highest, 0.0, 0.0, 0.0]))


@pytest.mark.parametrize("architecture", ["knrm", "tks"])
def test_every_architecture_scores_any_query_length_and_learns(architecture):
    torch.manual_seed(0)
    model = Drmm(spec(architecture=architecture, extras=("bm25",)))
    batch = inputs(4, [3, 1, 5, 2], extras=1)
    scores = model.score(batch)
    assert scores.shape == (4,) and torch.isfinite(scores).all()
    padded = DrmmInputs(
        torch.cat([batch.hist, torch.zeros(4, 2, BINS + 1)], dim=1),
        torch.cat([batch.mask, torch.zeros(4, 2, dtype=torch.bool)], dim=1),
        torch.cat([batch.gate, torch.zeros(4, 2, 1)], dim=1),
        batch.extras,
    )
    assert torch.allclose(model.score(padded), scores, atol=1e-6)
    hinge_loss(scores[:2], scores[2:], 1.0).backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_a_gain_on_a_few_candidates_is_not_significant_however_narrow_its_interval():
    """Three candidates whose held-out jobs all rank higher: every bootstrap resample's mean
    is above zero, but a sign-flip test cannot tell three wins from luck (p 0.25)."""
    champion = gate_scores("4", np.log(np.array([2.0, 3.0, 2.0])))
    challenger = gate_scores("5", np.log(np.array([1.0, 2.0, 1.0])))
    verdict = decide(challenger, champion, ranks_of(np.zeros(3)), NO_FLOOR, 2000, 1)
    assert verdict.gain is not None and verdict.gain.low > 0 and verdict.gain.p_value > 0.2
    assert not verdict.promoted and verdict.reason.startswith("no significant difference")


def test_the_gates_of_a_run_share_its_significance_level():
    """A gain significant for one gate alone is not when six challengers share 5%: each gate
    runs at 0.05 / 6, with its interval at that level too."""
    assert gate_alpha(0.05, 6) == pytest.approx(0.05 / 6)
    with pytest.raises(ValueError, match="at least one"):
        gate_alpha(0.05, 0)
    rng = np.random.default_rng(5)
    champion_ln_ranks = rng.uniform(1, np.log(100), 400)
    champion = gate_scores("4", champion_ln_ranks)
    challenger = gate_scores("5", champion_ln_ranks - 0.06 + rng.normal(0, 0.4, 400))
    bm25_ranks = ranks_of(champion_ln_ranks)
    alone = decide(challenger, champion, bm25_ranks, NO_FLOOR, 2000, 11, alpha=0.05)
    shared = decide(challenger, champion, bm25_ranks, NO_FLOOR, 2000, 11, alpha=gate_alpha(0.05, 6))
    assert alone.promoted and not shared.promoted
    assert alone.gain is not None and shared.gain is not None
    assert shared.gain.low < alone.gain.low  # the wider interval of the stricter level
    assert "(99.2% CI" in shared.reason and "alpha 0.0083" in shared.reason
