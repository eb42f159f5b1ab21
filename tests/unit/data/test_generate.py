"""The generator's pure parts: deterministic, made of the occupation's real material, with
ground truth that matches what was generated."""

import random

import numpy as np
import pytest

from jobrec_core.config import load_config
from jobrec_core.data.generate import (
    CandidatePools,
    GenerationPlan,
    assign_job_occupations,
    extract_requirements,
    generate_candidate_block,
    sample_sequence_lengths,
    synthesize_job,
)
from jobrec_core.taxonomy.onet import load_catalogue, match_title, normalise_title
from jobrec_core.taxonomy.titles import split_titles
from jobrec_core.text.tokens import load_stopwords
from tests.helpers import REPO


@pytest.fixture(scope="module")
def config():
    return load_config(
        "local", ["data.preset=tiny", "data.candidates_per_task=1000"], REPO / "conf"
    )


@pytest.fixture(scope="module")
def catalogue(config):
    return load_catalogue(config.data.reference_dir)


@pytest.fixture(scope="module")
def plan(config, catalogue):
    sizes = config.data.sizes()
    occupations = np.full(sizes.jobs, -1, dtype=np.int32)
    generated = sizes.jobs - sizes.real_ads
    occupations[:generated] = assign_job_occupations(generated, catalogue, 1.0, config.run.seed)
    titles = split_titles(catalogue, [], config.titles.split_seed).generator
    return GenerationPlan(
        catalogue, config.data, config.run.seed, load_stopwords(), occupations, titles
    )


def test_catalogue_is_o_net(catalogue):
    assert len(catalogue) > 900
    software = catalogue.occupations[catalogue.index_of("15-1252.00")]
    assert software.title == "Software Developers"
    assert software.function == "Computer and Mathematical"
    assert software.core_tasks and software.hot_technologies
    assert software.job_zone == 4
    assert all(0 <= r < len(catalogue) for related in catalogue.related for r in related)


@pytest.mark.parametrize(
    ("title", "normalised"),
    [("Sr. Data Engineer II", "data engineer"), ("Registered Nurse (RN)", "registered nurse rn")],
)
def test_normalise_title(title, normalised):
    assert normalise_title(title) == normalised


def test_match_title_handles_separators_and_inversions(catalogue):
    index = catalogue.title_index()
    software = catalogue.index_of("15-1252.00")
    assert match_title("Software Developer", index) == software
    assert match_title("Senior Software Developer - Remote", index) == software
    assert match_title("Developer, Software", index) == software
    assert match_title("Chief Vibes Officer", index) is None


def test_extract_requirements_finds_the_section():
    ad = (
        "About us\nWe build things.\nWhat we're looking for:\n"
        "- 3+ years of Python\n- SQL\nBenefits:\n- Snacks"
    )
    assert extract_requirements(ad) == "3+ years of Python SQL"
    assert extract_requirements("Great team.\nA degree in physics is required.") == (
        "A degree in physics is required."
    )


def test_a_job_is_deterministic_and_made_of_its_occupation(catalogue, plan):
    occupation = catalogue.occupations[catalogue.index_of("29-1141.00")]  # registered nurses
    stopwords = load_stopwords()
    titles = plan.titles[catalogue.index_of("29-1141.00")]
    first = synthesize_job(7, occupation, titles, catalogue, random.Random("s"), 0.0, stopwords)
    again = synthesize_job(7, occupation, titles, catalogue, random.Random("s"), 0.0, stopwords)
    assert first == again
    job_id, title, function, requirements, description, keywords, code = first
    assert (job_id, code, function in (occupation.function, "Healthcare Practitioners")) == (
        7,
        "29-1141.00",
        True,
    )
    titles = {occupation.title, *occupation.alternate_titles, *occupation.reported_titles}
    assert any(t in title for t in titles)
    tasks = set(occupation.core_tasks) | set(occupation.supplemental_tasks)
    assert sum(task in description for task in tasks) >= 2
    assert requirements and keywords
    assert all(k == k.lower() and k.isalpha() for k in keywords)


def test_ads_of_one_occupation_are_not_copies(catalogue, plan):
    index = catalogue.index_of("15-1252.00")
    occupation, titles = catalogue.occupations[index], plan.titles[index]
    rng = random.Random(1)
    ads = [
        synthesize_job(i, occupation, titles, catalogue, rng, 0.1, load_stopwords())[1:6]
        for i in range(50)
    ]
    assert len({ad[3] for ad in ads}) == 50  # descriptions


def test_candidate_block_is_deterministic(plan):
    pools = CandidatePools.build(plan)
    first = generate_candidate_block(0, plan, pools)
    assert first.equals(generate_candidate_block(0, plan, pools))
    assert not first.equals(generate_candidate_block(1, plan, pools))


def test_candidate_ground_truth_matches_the_sequences(plan):
    pools = CandidatePools.build(plan)
    batch = generate_candidate_block(0, plan, pools).to_pylist()
    codes = {
        i + 1: plan.catalogue.occupations[o].code
        for i, o in enumerate(plan.job_occupation)
        if o >= 0
    }
    assert len({c["identifier"] for c in batch}) == len(batch) == 1000
    for candidate in batch:
        jobs = [e["job_id"] for e in candidate["sequence"]]
        assert len(jobs) == len(set(jobs)) >= 1
        assert all(1 <= e["score"] <= 10 for e in candidate["sequence"])
        noise = set(candidate["noise_job_ids"])
        assert noise <= set(jobs)
        interests = {candidate["primary_occupation"], candidate["related_occupation"]}
        for job in set(jobs) - noise:
            assert codes[job] in interests
        for job in noise:
            assert codes[job] not in interests


def test_sequence_lengths_follow_the_configured_distribution(config):
    lengths = sample_sequence_lengths(np.random.default_rng(0), 200_000, config.data)
    shape = config.data.sequence_length
    assert abs((lengths == 1).mean() - shape.p_one) < 0.01
    assert abs((lengths == 2).mean() - shape.p_two) < 0.01
    assert abs(lengths[lengths >= 3].mean() - shape.tail_mean) < 0.2
    assert lengths.max() <= shape.max
