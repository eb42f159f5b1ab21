"""Which versions of the index a build's pruning keeps."""

from jobrec_core.search.index_versions import IndexVersion, versions_to_keep


def versions(*names: str, aliased: str = "", failed: str = "") -> list[IndexVersion]:
    """Complete versions, newest first, `aliased` the one the alias points to."""
    return [IndexVersion(n, complete=n != failed, aliased=n == aliased) for n in names]


def test_the_newest_complete_versions_and_the_aliased_one_are_kept():
    found = versions(
        "jobs_v5", "jobs_v4", "jobs_v3", "jobs_v2", aliased="jobs_v5", failed="jobs_v4"
    )
    assert versions_to_keep(found, 2, also_keep=[]) == {"jobs_v5", "jobs_v3"}  # v4 failed
    # a version that serves is kept however old it is
    old = versions("jobs_v5", "jobs_v4", "jobs_v3", aliased="jobs_v3")
    assert versions_to_keep(old, 1, also_keep=[]) == {"jobs_v5", "jobs_v3"}


def test_after_a_rollback_the_next_build_keeps_the_version_that_served_until_its_swap():
    """v3 was bad, the alias was rolled back to v2, then v4 was built and the alias moved
    from v2 to v4: v2 is the rollback target, not v3, though v3 is newer."""
    after_swap = versions("jobs_v4", "jobs_v3", "jobs_v2", "jobs_v1", aliased="jobs_v4")
    kept = versions_to_keep(after_swap, 2, also_keep=["jobs_v2"])
    assert kept == {"jobs_v4", "jobs_v3", "jobs_v2"}
    # the next build moves the alias from v4: v3 and v2 go
    next_swap = versions(
        "jobs_v5", *(v.name for v in after_swap if v.name in kept), aliased="jobs_v5"
    )
    assert versions_to_keep(next_swap, 2, also_keep=["jobs_v4"]) == {"jobs_v5", "jobs_v4"}
