"""Training the title encoder as a Siamese network (seed 001, §3-4): pairs of titles of one
occupation pulled together, pairs of different occupations pushed apart, with the paper's
contrastive loss on the cosine `E` of the two embeddings:

    L+ = (1 - E)² / 4        L- = E² if E > margin, else 0

(the paper prints the negative case's condition as `E < m`, which would push apart only pairs
that are already apart; its figure 2 and the Siamese literature penalise the close ones.)

Each step draws `batch_occupations` occupations and `pairs_per_occupation` positive pairs
of each (two titles, or a title and its typo or extra-word view, the paper's augmentations;
`PairSampler`), encodes the titles once, and scores every pair in the batch: every pair of
one occupation is a positive, every pair of different occupations a negative. The negatives'
mean loss weighs `negative_weight` times the positives', the paper's 4:1 ratio of negative
to positive pairs, without encoding a title more than once. Pure torch and numpy: no Spark,
no MLflow.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from jobrec_core.titles.sets import ExtraWords, TitleSets, with_typos
from jobrec_scoring.titles import EncoderSpec, TitleEncoder, TitleNormaliser, char_ids

log = logging.getLogger(__name__)

SENIORITY = (
    "senior", "sr.", "sr", "junior", "jr.", "lead", "staff", "principal", "head of", "chief",
    "associate", "assistant", "intern", "trainee", "entry level", "experienced", "founding",
)  # fmt: skip
WORK_TERMS = (
    "remote",
    "hybrid",
    "contract",
    "m/f/d",
    "f/m/x",
    "full time",
    "part time",
    "temporary",
)


@dataclass(frozen=True)
class TrainingSettings:
    steps: int
    batch_occupations: int
    pairs_per_occupation: int
    learning_rate: float
    margin: float
    negative_weight: float
    typo_rate: float
    typo_substitute: float
    typo_delete: float
    extra_words_rate: float
    augmented_rate: float
    confusable_share: float
    seed: int
    log_every: int


def with_extra_words(text: str, words: ExtraWords, rng: random.Random, max_chars: int) -> str:
    """`text` with words around it as real titles have them: a seniority or a word found
    before titles in front, and after it a location, a team, a work term or words found
    after titles, with the separators real titles use."""
    draw = rng.random()
    if draw < 0.3:
        text = f"{rng.choice(SENIORITY)} {text}"
    elif draw < 0.45 and words.before:
        text = f"{rng.choice(words.before)} {text}"
    draw = rng.random()
    if draw < 0.2 and words.locations:
        text = f"{text} {rng.choice(('-', '|', ',', '–'))} {rng.choice(words.locations)}"
    elif draw < 0.35:
        text = f"{text} ({rng.choice(WORK_TERMS)})"
    elif draw < 0.55 and words.teams:
        text = f"{text} {rng.choice(('-', '|', ','))} {rng.choice(words.teams)}"
    elif draw < 0.75 and words.after:
        text = f"{text} {rng.choice(words.after)}"
    return text[:max_chars].rstrip()


class PairSampler:
    """Batches of P positive pairs, one per occupation, drawn as seed 001 augments its data:

    * a title and itself with typos (`typo_rate`);
    * a title and itself with extra words (`extra_words_rate`);
    * a composition variant or a real title with extra words, and the taxonomy title it was
      made from or contains (`augmented_rate`, where the occupation has any);
    * otherwise two titles of the occupation.
    """

    def __init__(self, sets: TitleSets, settings: TrainingSettings, max_chars: int) -> None:
        self.sets = sets
        self.settings = settings
        self.max_chars = max_chars
        self.codes = sorted(sets.members)
        sizes = np.array(
            [len(sets.members[c]) + len(sets.augmented.get(c, ())) for c in self.codes],
            dtype=np.float64,
        )
        # sqrt: large occupations are seen more, without drowning the small ones
        self.weights = np.sqrt(sizes) / np.sqrt(sizes).sum()
        self.position = {code: i for i, code in enumerate(self.codes)}
        self.rng = random.Random(settings.seed)
        self.numpy_rng = np.random.default_rng(settings.seed)

    def pair(self, code: str) -> tuple[str, str]:
        s = self.settings
        titles = self.sets.members[code]
        title = self.rng.choice(titles)
        draw = self.rng.random()
        if draw < s.typo_rate:
            return title, with_typos(title, self.rng, s.typo_substitute + s.typo_delete)
        draw -= s.typo_rate
        if draw < s.extra_words_rate:
            return title, with_extra_words(title, self.sets.extra_words, self.rng, self.max_chars)
        draw -= s.extra_words_rate
        augmented = self.sets.augmented.get(code, ())
        if augmented and draw < s.augmented_rate:
            item = self.rng.choice(augmented)
            return item.text, item.anchor
        return title, self.rng.choice(titles)

    def occupations(self) -> list[int]:
        """P distinct occupations: a `confusable_share` of them drawn as one of the
        confusable occupations of another one drawn (a hard negative), the rest by weight."""
        count = min(self.settings.batch_occupations, len(self.codes))
        drawn = self.numpy_rng.choice(len(self.codes), size=count, replace=False, p=self.weights)
        chosen: list[int] = []
        seen: set[int] = set()
        hard = round(self.settings.confusable_share * count)
        for anchor in drawn:
            if len(chosen) >= count:
                break
            if anchor not in seen:
                chosen.append(int(anchor))
                seen.add(int(anchor))
            neighbours = self.sets.confusable.get(self.codes[anchor], ())
            if hard > 0 and neighbours and len(chosen) < count:
                other = self.position[self.rng.choice(neighbours)]
                if other not in seen:
                    chosen.append(other)
                    seen.add(other)
                    hard -= 1
        return chosen

    def batch(self) -> tuple[list[str], np.ndarray]:
        """The titles of `pairs_per_occupation` positive pairs of each of P occupations, and
        their occupation ids."""
        texts: list[str] = []
        labels: list[int] = []
        for occupation in self.occupations():
            for _ in range(self.settings.pairs_per_occupation):
                texts.extend(self.pair(self.codes[occupation]))
                labels.extend((occupation, occupation))
        return texts, np.asarray(labels, dtype=np.int64)


def contrastive_loss(
    vectors: torch.Tensor, labels: torch.Tensor, margin: float, negative_weight: float
) -> torch.Tensor:
    """The batch's loss (see the module): `vectors` are unit rows; every pair of rows with
    the same label is a positive, every pair with different labels a negative."""
    similarity = vectors @ vectors.T
    same = labels[:, None] == labels[None, :]
    upper = torch.triu(torch.ones_like(same), diagonal=1)
    positive = similarity[same & upper]
    negative = similarity[~same & upper]
    positive_loss = 0.25 * (1.0 - positive) ** 2
    negative_loss = torch.where(negative > margin, negative**2, torch.zeros_like(negative))
    return positive_loss.mean() + negative_weight * negative_loss.mean()


def train_encoder(
    sets: TitleSets,
    spec: EncoderSpec,
    settings: TrainingSettings,
    on_progress: Callable[[int, float, float, TitleEncoder], None] | None = None,
) -> TitleNormaliser:
    """Train an encoder for `settings.steps` steps of Adam (the learning rate decays linearly
    to a tenth) and return it with the vectors of the titles it knows: the taxonomy's, then
    the training variants and real titles (`TitleSets.augmented`), with seed 001's lookup.
    `on_progress(step, mean loss, seconds, encoder)` is called every `settings.log_every`
    steps."""
    torch.manual_seed(settings.seed)
    encoder = TitleEncoder(spec)
    optimiser = torch.optim.Adam(encoder.parameters(), lr=settings.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: 1.0 - 0.9 * step / max(settings.steps, 1)
    )
    sampler = PairSampler(sets, settings, spec.max_chars)
    started = time.perf_counter()
    running = 0.0
    encoder.train()
    for step in range(1, settings.steps + 1):
        texts, labels = sampler.batch()
        ids, lengths = char_ids(texts, spec.max_chars)
        loss = contrastive_loss(
            encoder(ids, lengths),
            torch.from_numpy(labels),
            settings.margin,
            settings.negative_weight,
        )
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(encoder.parameters(), 5.0)
        optimiser.step()
        schedule.step()
        running += float(loss.detach())
        if on_progress is not None and step % settings.log_every == 0:
            on_progress(step, running / settings.log_every, time.perf_counter() - started, encoder)
            encoder.train()  # the callback may have embedded titles in eval mode
            running = 0.0
    taxonomy = list(sets.taxonomy)
    known = [(item.text, code) for code, items in sets.augmented.items() for item in items]
    return TitleNormaliser.of(
        encoder, [t.text for t in taxonomy], [t.occupation for t in taxonomy], known
    )
