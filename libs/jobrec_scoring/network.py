"""The Deep Relevance Matching Model (Guo et al. 2016; paper §5.1, §8.2) in plain PyTorch.

Per query term, the matching histogram goes through one MLP shared by all terms and gives a
score; a softmax over the query terms of `w · x_i` (term gating, `x_i` the term's IDF or its
word vector) weighs the term scores into the document score. Padded query terms are masked
out of the softmax, so a batch can mix queries of any length.

Optionally a last linear layer mixes the document score with extra features (common
unigrams, common bigrams, BM25, the candidate-profile features; `log1p` of each, because raw
BM25 scores and counts are two orders of magnitude above the document score, and the log
of the co-interest ratio, `LOG_FLOOR`). Dropout on the extra-feature inputs keeps the
model from copying BM25 (paper §8.2 v2). The layer starts as "document score only" (weight 1
on it, 0 on the extras), so two-phase training (phase 1: last layer frozen) first learns the
histogram part alone, then (phase 2: everything else frozen) how much the extras add.

A model is fully described by a :class:`DrmmSpec` (JSON-able), saved next to its weights:
whoever loads it (training resume, the MLflow pyfunc, the recommender) rebuilds the same
network without the training configuration.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from jobrec_scoring.activations import tanh_in_place
from jobrec_scoring.vectors import QueryVectors

EXTRA_FEATURES = (
    "unigrams",
    "bigrams",
    "bm25",
    "profile_tfidf",
    "profile_w2v",
    "co_interest",
    "profile_behaviour",
    "occupation_agreement",
)
# Extra features entered as log(floor + x) rather than log1p(x): `co_interest` is a ratio
# of walks to candidates spread over four orders of magnitude (most pools: 0.001 to 1), which
# log1p would leave nearly linear, its few large values then deciding every pair. The floor
# was chosen on the dev held-out MRR of a linear model on the demo's pool pairs (1e-4 and
# 1e-3: 0.191; 1e-2: 0.186; log1p: 0.177), never on the ground truth.
LOG_FLOOR = {"co_interest": 1e-3}


@dataclass(frozen=True)
class DrmmSpec:
    """Everything needed to rebuild a DRMM; stored with its weights."""

    bins: int  # histogram width is bins + 1 (the exact-match bin)
    histogram: str  # ch | nh | lch: how stored counts are turned into the model's input
    mlp_layers: int
    mlp_width: int
    gating: str  # idf | embedding
    gate_dim: int  # 1 for IDF gating, the word-vector size for embedding gating
    extras: tuple[str, ...] = ()
    extras_keep: float = 1.0
    two_phase: bool = False
    phase2_keep: dict[str, float] = field(default_factory=dict)
    examples: str = "paper"  # what it is trained on: the paper's triples, or pairs from pools
    architecture: str = "drmm"  # drmm | knrm | tks: what reads a query term's similarities
    top_k: int = 10  # tks: the similarities per query term
    # The term gate also reads each query term's share of the candidate's jobs
    # (`features.queries.build_query`): one more input channel, `gate_dim` counts it.
    gate_share: bool = False
    # DRMM-fields: a query term's histogram of matches in the lead fields (the title) and
    # its histogram of matches in the rest, side by side: the term MLP reads 2 (bins + 1)
    # values and can weigh a title match above a description match.
    field_histograms: bool = False
    # The model's weight against BM25 when a ranking mixes the two, each z-normalised per
    # query (`ranking.interpolation`): 1 is the network alone. Not the network's business:
    # its `score` stays the network's own; whoever ranks a pool applies the mix. Chosen on
    # dev after training (`model.versions.*.bm25_mix`).
    bm25_alpha: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["extras"] = list(self.extras)
        return values

    @staticmethod
    def from_dict(values: dict[str, Any]) -> DrmmSpec:
        return DrmmSpec(**{**values, "extras": tuple(values.get("extras", ()))})


@dataclass
class DrmmInputs:
    """One side of a batch: B (query, document) pairs, queries padded to T terms.

    hist: (B, T, bins + 1) float, the histogram variant the model reads (B, T, 2 (bins + 1)
        with `field_histograms`: the lead fields' histogram, then the other fields'), or on
        the way to a GPU the stored int16 counts (`jobrec_scoring.inputs.histogram_input`);
    mask: (B, T) bool, True for real query terms;
    gate: (B, T, gate_dim) float, IDF or word vector per query term;
    extras: (B, E) float, raw extra features in the order of `DrmmSpec.extras` (E may be 0).
    """

    hist: torch.Tensor
    mask: torch.Tensor
    gate: torch.Tensor
    extras: torch.Tensor

    def to(self, device: torch.device | str) -> DrmmInputs:
        return DrmmInputs(*(t.to(device, non_blocking=True) for t in self.tensors()))

    def pin_memory(self) -> DrmmInputs:
        """Page-locked copies (`DataLoader(pin_memory=True)` calls this): a copy to a GPU
        from them runs asynchronously."""
        return DrmmInputs(*(t.pin_memory() for t in self.tensors()))

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.hist, self.mask, self.gate, self.extras

    @staticmethod
    def concat(first: DrmmInputs, second: DrmmInputs) -> DrmmInputs:
        """Both sides of a triple in one forward pass (one DDP reduction per step)."""
        return DrmmInputs(
            *(
                torch.cat(pair, dim=0)
                for pair in zip(first.tensors(), second.tensors(), strict=True)
            )
        )


class Drmm(nn.Module):
    def __init__(self, spec: DrmmSpec) -> None:
        super().__init__()
        self.spec = spec
        self.kernels: KernelPooling | None = None
        width, hidden = histogram_width(spec), spec.mlp_layers
        if spec.architecture == "knrm":  # one linear layer over the summed kernels
            self.kernels = KernelPooling(spec.bins)
            width, hidden = self.kernels.size, 0
        elif spec.architecture == "tks":
            width = spec.top_k
        layers: list[nn.Module] = []
        for _ in range(hidden):
            layers += [nn.Linear(width, spec.mlp_width), nn.Tanh()]
            width = spec.mlp_width
        layers.append(nn.Linear(width, 1))
        self.term_mlp = nn.Sequential(*layers)
        # Glorot initialisation scaled for tanh: with PyTorch's default a signal fades through
        # ten tanh layers, the scores start flat and the paper's early-stopping rule (dev
        # accuracy unchanged) could end training on the initial plateau (seen on the demo).
        for layer in self.term_mlp:
            if isinstance(layer, nn.Linear):
                nn.init.xavier_uniform_(layer.weight, gain=nn.init.calculate_gain("tanh"))
                nn.init.zeros_(layer.bias)
        # K-NRM sums its terms without gating: no gate, so DDP sees no unused parameter.
        self.gate = None if self.kernels is not None else nn.Linear(spec.gate_dim, 1, bias=False)
        self.combine: nn.Linear | None = None
        if spec.extras:
            self.combine = nn.Linear(1 + len(spec.extras), 1)
            with torch.no_grad():
                self.combine.weight.zero_()
                self.combine.weight[0, 0] = 1.0
                self.combine.bias.zero_()
        self.phase = 1
        # Embedding gating: the word vectors of query terms, saved with the weights (not
        # parameters: they are not trained).
        self.query_vectors: QueryVectors | None = None
        self.keep_phase1: torch.Tensor
        self.keep_phase2: torch.Tensor
        self.register_buffer("keep_phase1", self._keep_vector({}), persistent=False)
        self.register_buffer("keep_phase2", self._keep_vector(spec.phase2_keep), persistent=False)
        self.log_floor: torch.Tensor
        floors = [LOG_FLOOR.get(name, 0.0) for name in spec.extras]
        self.register_buffer("log_floor", torch.tensor(floors), persistent=False)

    def _keep_vector(self, overrides: dict[str, float]) -> torch.Tensor:
        return torch.tensor(
            [overrides.get(name, self.spec.extras_keep) for name in self.spec.extras],
            dtype=torch.float32,
        )

    # Run the term encoders on the real terms alone (True) or on every padded position
    # (False); None chooses by device, as `forward` explains. The scores are the same.
    pack_terms: bool | None = None

    def forward(
        self, hist: torch.Tensor, mask: torch.Tensor, gate: torch.Tensor, extras: torch.Tensor
    ) -> torch.Tensor:
        """Scores, shape (B,). Positional tensors (not `DrmmInputs`) so that the module can
        be traced, exported and wrapped by DDP like any other."""
        # On a CPU the term encoders run on the real query terms only: a batch pads every
        # query to its longest (up to 300 terms against a median of about 50), and the padding
        # would be most of the work. On a GPU the padding is cheap, while packing (`hist[mask]`)
        # makes every step wait for the device to count the terms. Either way padded positions
        # score 0 and get no weight below.
        packed = not hist.is_cuda if self.pack_terms is None else self.pack_terms
        # One query's documents (a request, or `score_frame`'s groups) have no padding at all:
        # their terms are a view, not a copy.
        packed = packed and not _all_true(mask)
        terms = hist[mask] if packed else hist.reshape(-1, hist.shape[-1])
        if self.kernels is not None:
            document = self._knrm(terms, mask, packed)
        else:
            if self.spec.architecture == "tks":
                terms = top_similarities(counts_of(terms, self.spec.histogram), self.spec)
            scores = self._term_mlp(terms).squeeze(-1)
            if packed:
                term_scores = torch.zeros(mask.shape, dtype=hist.dtype, device=hist.device)
                term_scores = term_scores.masked_scatter(mask, scores)
            else:
                term_scores = scores.view(mask.shape).masked_fill(~mask, 0.0)
            assert self.gate is not None
            logits = self.gate(gate).squeeze(-1).masked_fill(~mask, float("-inf"))
            # A query with no terms at all would softmax to NaN; it scores 0 instead.
            weights = torch.nan_to_num(torch.softmax(logits, dim=1), nan=0.0)
            document = (weights * term_scores).sum(dim=1)
        if self.combine is None:
            return document
        clamped = extras.clamp_min(0.0)
        features = torch.where(
            self.log_floor > 0, torch.log(clamped + self.log_floor), torch.log1p(clamped)
        )
        if self.training:
            keep = self.keep_phase2 if self.phase == 2 else self.keep_phase1
            features = features * torch.bernoulli(keep.expand_as(features)) / keep
        return self.combine(torch.cat([document.unsqueeze(1), features], dim=1)).squeeze(1)

    def score(self, inputs: DrmmInputs) -> torch.Tensor:
        return self(*inputs.tensors())

    def _knrm(self, terms: torch.Tensor, mask: torch.Tensor, packed: bool) -> torch.Tensor:
        """K-NRM: per query term, log soft-TF of each kernel; summed over the query's terms,
        then one linear layer (`term_mlp` is that layer here). `terms` are the real terms
        (`packed`) or every padded position."""
        assert self.kernels is not None
        pooled = torch.log1p(self.kernels(counts_of(terms, self.spec.histogram)))
        if packed:
            per_query = torch.zeros(
                (mask.shape[0], pooled.shape[1]), dtype=pooled.dtype, device=pooled.device
            )
            per_query = per_query.index_add(0, mask.nonzero()[:, 0], pooled)
        else:
            per_query = (pooled.view(*mask.shape, -1) * mask.unsqueeze(-1)).sum(dim=1)
        return self._term_mlp(per_query).squeeze(-1)

    def _term_mlp(self, rows: torch.Tensor) -> torch.Tensor:
        """`term_mlp` over (N, width) rows. Scoring on a CPU (no gradients) runs it on the
        transposed rows, (width, N): a layer is then one `addmm` of a 10 x 10 weight and a
        10 x N block of long rows (the bias folded in), and tanh runs in place on contiguous
        memory (:func:`jobrec_scoring.activations.tanh_in_place`, one compiled kernel that
        computes the same floats on every CPU). On a demo query's 6,700 (term, job) rows,
        one thread, an AVX2 CPU, with torch's tanh: 3.6 ms, against 6.0 ms for the same
        products in numpy (its small products 2x torch's) and 10.0 ms through
        `nn.Linear`'s (N, 10) rows (docs/BENCHMARKS.md). Evaluation, the pyfunc and the
        recommendations take this path, and so does dev selection when training runs on
        CPUs; training steps and GPUs use `nn.Linear`. Both compute the same function; their
        float32 sums differ in order, by about 1e-6 relative."""
        if torch.is_grad_enabled() or rows.device.type != "cpu":
            return self.term_mlp(rows)
        values = rows.detach().T
        for layer in self.term_mlp:
            if isinstance(layer, nn.Linear):
                values = torch.addmm(layer.bias.detach()[:, None], layer.weight.detach(), values)
            else:
                tanh_in_place(values)
        return values.T.contiguous()


def _all_true(mask: torch.Tensor) -> bool:
    """`mask.all()`, through numpy on a CPU: torch's reduction costs about 50 us a call there,
    a tenth of a 100-job request's scoring."""
    return bool(mask.numpy().all() if mask.device.type == "cpu" else mask.all())


def histogram_width(spec: DrmmSpec) -> int:
    """Values per query term in `DrmmInputs.hist`: one histogram, or two with fields."""
    return (spec.bins + 1) * (2 if spec.field_histograms else 1)


def counts_of(histograms: torch.Tensor, variant: str) -> torch.Tensor:
    """The counts behind a histogram variant: K-NRM and DRMM-TKS count similarities (NH keeps
    its normalisation by document length, which is K-NRM's soft-TF over a normalised text)."""
    return torch.round(torch.expm1(histograms)) if variant == "lch" else histograms


def bin_centres(bins: int, device: torch.device) -> torch.Tensor:
    """The similarity each histogram bin stands for: its centre, and 1 for exact matches."""
    width = 2.0 / bins
    centres = -1.0 + width * (torch.arange(bins, dtype=torch.float32, device=device) + 0.5)
    return torch.cat([centres, torch.ones(1, device=device)])


class KernelPooling(nn.Module):
    """K-NRM's RBF kernels (Xiong et al. 2017; seed 002) over a query term's similarities,
    read from its histogram: each similarity counts at its bin's centre, a quantisation of
    2 / bins (0.067) against the kernels' width of 0.1. Eleven kernels: exact match (mu 1,
    sigma 0.001), then mu 0.9, 0.7, ..., -0.9 (sigma 0.1)."""

    def __init__(self, bins: int) -> None:
        super().__init__()
        means = torch.tensor([1.0, *[0.9 - 0.2 * i for i in range(10)]])
        widths = torch.tensor([1e-3, *[0.1] * 10])
        centres = bin_centres(bins, torch.device("cpu"))
        weights = torch.exp(-((centres[:, None] - means[None, :]) ** 2) / (2 * widths**2))
        weights[:-1, 0] = 0.0  # only exact matches sit in the exact-match kernel
        self.weights: torch.Tensor
        self.register_buffer("weights", weights, persistent=False)

    def forward(self, counts: torch.Tensor) -> torch.Tensor:
        return counts @ self.weights

    @property
    def size(self) -> int:
        return int(self.weights.shape[1])


def top_similarities(counts: torch.Tensor, spec: DrmmSpec) -> torch.Tensor:
    """DRMM-TKS's input: a query term's `top_k` highest similarities, read from its counts
    (bin centres, highest first; 0 where the document has fewer terms), shape (N, top_k)."""
    centres = bin_centres(spec.bins, counts.device)
    highest_first = torch.flip(counts, dims=[1])
    reached = torch.cumsum(highest_first, dim=1)
    ranks = torch.arange(1, spec.top_k + 1, dtype=counts.dtype, device=counts.device)
    # for the r-th largest similarity: the first bin (from the top) whose running count
    # reaches r
    position = torch.searchsorted(reached.contiguous(), ranks.expand(len(counts), -1).contiguous())
    found = position < counts.shape[1]
    values = torch.flip(centres, dims=[0])[position.clamp_max(counts.shape[1] - 1)]
    return torch.where(found, values, torch.zeros_like(values))
