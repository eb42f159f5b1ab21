"""Which refused documents an indexing attempt writes again and which it quarantines."""

from jobrec_core.indexing.documents import DeadLetter
from jobrec_core.indexing.stage import sort_dead_letters

OVERLOAD = "es_rejected_execution_exception"
MAPPING = "document_parsing_exception"


def letter(job_id: str, error: str, document: str = "{}") -> DeadLetter:
    return DeadLetter(job_id=job_id, error=error, message="refused", document=document)


def test_refusals_of_every_attempt_are_kept_once_and_overload_is_written_again():
    first = [letter("7", MAPPING), letter("8", OVERLOAD), letter("9", OVERLOAD)]
    refused, retry = sort_dead_letters(first, {})
    assert (list(refused), retry) == (["7"], [8, 9])

    # The second attempt writes only 8 and 9: job 7's refusal must not be forgotten.
    refused, retry = sort_dead_letters([letter("9", MAPPING)], refused)
    assert (sorted(refused), retry) == (["7", "9"], [])

    # A whole write repeated after a failure sends job 7 again: it is still one refusal.
    refused, retry = sort_dead_letters([letter("7", MAPPING)], refused)
    assert (sorted(refused), retry) == (["7", "9"], [])


def test_overload_without_a_numeric_job_id_is_refused_not_dropped():
    letters = [letter("x1", OVERLOAD), letter("", OVERLOAD, '{"title": "no id"}')]
    refused, retry = sort_dead_letters(letters, {})
    assert retry == []
    assert sorted(refused) == ["x1", '{"title": "no id"}']
    assert all(
        d.error == OVERLOAD and "cannot be written again" in d.message for d in refused.values()
    )


def test_a_document_written_again_is_no_longer_counted_refused():
    refused, _ = sort_dead_letters([letter("7", MAPPING)], {})
    refused, retry = sort_dead_letters([letter("7", OVERLOAD)], refused)
    assert (refused, retry) == ({}, [7])
