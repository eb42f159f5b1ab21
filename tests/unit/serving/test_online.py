"""The online endpoint's request validation: every bad request is a 4xx with a reason."""

import json

import pytest

from jobrec_core.serving.online import Interest, RecommendRequest, RequestError, parse_request

KNOWN = {17, 42, 99}
MAX_JOBS = 5


def parse(payload) -> RecommendRequest:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return parse_request(body, KNOWN, MAX_JOBS)


def test_a_valid_request_keeps_the_jobs_in_their_order_and_repeats():
    request = parse({"jobs": [{"job_id": 42, "score": 10}, {"job_id": 17, "score": 1}]})
    assert request == RecommendRequest((Interest(42, 10), Interest(17, 1)), 0)
    again = parse({"candidate_id": 7, "jobs": [{"job_id": 17, "score": 5}] * 2})
    assert again.candidate_id == 7 and again.jobs == (Interest(17, 5),) * 2


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        # more digits than Python converts to an integer; arrays nested too deep to parse
        (b'{"jobs": [{"job_id": ' + b"1" * 5000 + b', "score": 5}]}', "not JSON"),
        (b"[" * 100_000, "not JSON: it is nested too deeply"),
        ([{"job_id": 17, "score": 5}], "JSON object"),
        ({}, "non-empty list"),
        ({"jobs": []}, "non-empty list"),
        ({"jobs": {"job_id": 17, "score": 5}}, "non-empty list"),
        ({"jobs": [17]}, r"jobs\[0\] must be"),
        ({"jobs": [{"job_id": 17}]}, r"jobs\[0\] must be"),
        ({"jobs": [{"job_id": 17, "score": 5, "extra": 1}]}, r"jobs\[0\] must be"),
        ({"jobs": [{"job_id": "17", "score": 5}]}, r"jobs\[0\].job_id must be an integer"),
        ({"jobs": [{"job_id": True, "score": 5}]}, r"jobs\[0\].job_id must be an integer"),
        ({"jobs": [{"job_id": 17, "score": 5}, {"job_id": 42, "score": 0}]}, r"jobs\[1\].score"),
        ({"jobs": [{"job_id": 17, "score": 11}]}, "from 1 to 10, got 11"),
        ({"jobs": [{"job_id": 17, "score": 7.5}]}, "from 1 to 10, got 7.5"),
        ({"jobs": [{"job_id": 17, "score": None}]}, "from 1 to 10, got None"),
        ({"jobs": [{"job_id": 17, "score": 5}] * 6}, "6 jobs; a request takes at most 5"),
        ({"jobs": [{"job_id": 17, "score": 5}], "candidate_id": "x"}, "candidate_id"),
        ({"jobs": [{"job_id": 17, "score": 5}], "user": 1}, r"unknown fields \['user'\]"),
    ],
)
def test_a_malformed_request_is_a_400_that_says_what_is_wrong(payload, message):
    with pytest.raises(RequestError, match=message) as refused:
        parse(payload)
    assert refused.value.status == 400
    assert refused.value.as_json()["error"] == str(refused.value)


def test_a_refused_value_is_quoted_short_never_whole():
    """The message goes into the answer and the log line: a megabyte-long field must not."""
    with pytest.raises(RequestError) as refused:
        parse({"jobs": [{"job_id": 17, "score": "x" * 100_000}]})
    assert "from 1 to 10, got 'xxx" in str(refused.value)
    assert len(str(refused.value)) < 300
    with pytest.raises(RequestError) as refused:
        parse({"jobs": [{"job_id": 17, "note": ["y" * 100_000] * 100}]})
    assert len(str(refused.value)) < 300


def test_unknown_job_ids_are_a_422_that_lists_them():
    with pytest.raises(RequestError) as refused:
        parse(
            {
                "jobs": [
                    {"job_id": 5, "score": 3},
                    {"job_id": 17, "score": 3},
                    {"job_id": 1, "score": 2},
                ]
            }
        )
    assert refused.value.status == 422
    assert refused.value.as_json() == {"error": "unknown job ids", "unknown_job_ids": [1, 5]}
