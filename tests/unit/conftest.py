"""Fixtures shared by the unit tests of the WMD and its solvers."""

import numpy as np
import pytest
from gensim.models import KeyedVectors

from tests.helpers import WORDS


@pytest.fixture(scope="module")
def vectors():
    """Random 100-d vectors for WORDS, as gensim holds them (float32)."""
    rng = np.random.default_rng(7)
    keyed = KeyedVectors(100)
    keyed.add_vectors(WORDS, rng.normal(size=(len(WORDS), 100)).astype(np.float32))
    return keyed
