"""The real material the synthetic jobs and the title normaliser are made of: O*NET 27.0
occupations.

:func:`load_catalogue` reads the O*NET tables in `../shared/data/onet-27.0/` (US Department of
Labor, CC BY 4.0) into one small, picklable :class:`Catalogue`: per occupation its titles, task
statements, technology skills and job zone, plus the graded relatedness between occupations.
It is built once on the driver (about a thousand occupations) and broadcast to the executors
that generate the data.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ONET_DIR = "onet-27.0"

# SOC 2018 major groups: the first two digits of an O*NET-SOC code, the job's "function".
SOC_MAJOR_GROUPS = {
    "11": "Management",
    "13": "Business and Financial Operations",
    "15": "Computer and Mathematical",
    "17": "Architecture and Engineering",
    "19": "Life, Physical, and Social Science",
    "21": "Community and Social Service",
    "23": "Legal",
    "25": "Educational Instruction and Library",
    "27": "Arts, Design, Entertainment, Sports, and Media",
    "29": "Healthcare Practitioners and Technical",
    "31": "Healthcare Support",
    "33": "Protective Service",
    "35": "Food Preparation and Serving Related",
    "37": "Building and Grounds Cleaning and Maintenance",
    "39": "Personal Care and Service",
    "41": "Sales and Related",
    "43": "Office and Administrative Support",
    "45": "Farming, Fishing, and Forestry",
    "47": "Construction and Extraction",
    "49": "Installation, Maintenance, and Repair",
    "51": "Production",
    "53": "Transportation and Material Moving",
    "55": "Military Specific",
}

# Related Occupations tiers, closest first.
RELATEDNESS_TIERS = ("Primary-Short", "Primary-Long", "Supplemental")

# Words that qualify a title without changing the occupation ("Senior Data Engineer II").
_TITLE_QUALIFIERS = frozenset(
    [
        "senior",
        "sr",
        "junior",
        "jr",
        "staff",
        "principal",
        "lead",
        "chief",
        "associate",
        "intern",
        "trainee",
        "i",
        "ii",
        "iii",
        "iv",
        "v",
    ]
)
_NON_WORD = re.compile(r"[^a-z]+")
_TITLE_SEPARATOR = re.compile(r"\s[-–—|/]\s|\(|:")


class ReferenceDataError(FileNotFoundError):
    """The reference data folder is missing or incomplete."""


@dataclass(frozen=True)
class Occupation:
    code: str
    title: str
    function: str
    alternate_titles: tuple[str, ...]
    reported_titles: tuple[str, ...]
    core_tasks: tuple[str, ...]
    supplemental_tasks: tuple[str, ...]
    hot_technologies: tuple[str, ...]
    other_technologies: tuple[str, ...]
    job_zone: int


@dataclass(frozen=True)
class Catalogue:
    occupations: tuple[Occupation, ...]
    related: tuple[tuple[int, ...], ...]
    """For each occupation (by index), the indices of its related occupations, closest first."""
    job_zones: dict[int, tuple[str, str]]
    """Job zone -> (experience, education) sentences of O*NET's Job Zone Reference."""

    def __len__(self) -> int:
        return len(self.occupations)

    def index_of(self, code: str) -> int:
        return self._codes()[code]

    def _codes(self) -> dict[str, int]:
        return {o.code: i for i, o in enumerate(self.occupations)}

    def title_index(self) -> dict[str, int]:
        """Normalised title -> occupation index, for labelling real ads by their title.

        A title several occupations share goes to the one that names it most directly: its
        official title first, then a title workers reported, then an alternate title (ties:
        the lower code).
        """
        best: dict[str, tuple[int, int]] = {}
        for index, occupation in enumerate(self.occupations):
            sources = (
                (0, (occupation.title,)),
                (1, occupation.reported_titles),
                (2, occupation.alternate_titles),
            )
            for priority, titles in sources:
                for title in titles:
                    key = normalise_title(title)
                    if key and (key not in best or (priority, index) < best[key]):
                        best[key] = (priority, index)
        return {key: index for key, (_, index) in best.items()}


def match_title(title: str, index: dict[str, int]) -> int | None:
    """The occupation of a free-text ad title, or None (see :func:`match_key`)."""
    key = match_key(title, index)
    return None if key is None else index[key]


def match_key(title: str, index: dict[str, int]) -> str | None:
    """The normalised O*NET title (a key of `index`) a free-text ad title names, or None.

    Tries the whole title, then the part before a separator ("Data Engineer - Remote",
    "Designer (Contract)"), then an inverted "Developer, Backend". The part before a comma
    alone is not tried: "Director, Channel Marketing" is not any director.
    """
    head = _TITLE_SEPARATOR.split(title)[0]
    candidates = [title, head]
    if "," in head:
        first, rest = head.split(",", 1)
        candidates.append(f"{rest} {first}")
    for candidate in candidates:
        key = normalise_title(candidate)
        if key in index:
            return key
    return None


def normalise_title(title: str) -> str:
    """Lowercase words of a title without seniority qualifiers: 'Sr. Data Engineer II' ->
    'data engineer'."""
    words = _NON_WORD.sub(" ", title.lower()).split()
    return " ".join(w for w in words if w not in _TITLE_QUALIFIERS)


def load_catalogue(reference_dir: str | Path) -> Catalogue:
    """Occupations that have task statements and at least one title, in code order."""
    onet = Path(reference_dir) / ONET_DIR
    if not (onet / "Occupation Data.txt").is_file():
        raise ReferenceDataError(
            f"O*NET 27.0 not found in {onet} (expected 'Occupation Data.txt'); set "
            "data.reference_dir to the folder that holds onet-27.0/"
        )
    titles = {r["O*NET-SOC Code"]: r["Title"] for r in _rows(onet / "Occupation Data.txt")}
    alternate = _grouped(onet / "Alternate Titles.txt", "Alternate Title")
    reported = _grouped(onet / "Sample of Reported Titles.txt", "Reported Job Title")
    core: dict[str, list[str]] = defaultdict(list)
    supplemental: dict[str, list[str]] = defaultdict(list)
    for row in _rows(onet / "Task Statements.txt"):
        # Task type is Core, Supplemental, or n/a (not rated): unrated tasks count as core.
        target = supplemental if row["Task Type"] == "Supplemental" else core
        target[row["O*NET-SOC Code"]].append(row["Task"])
    hot: dict[str, list[str]] = defaultdict(list)
    other: dict[str, list[str]] = defaultdict(list)
    for row in _rows(onet / "Technology Skills.txt"):
        target = hot if row["Hot Technology"] == "Y" else other
        target[row["O*NET-SOC Code"]].append(row["Example"])
    zones = {r["O*NET-SOC Code"]: int(r["Job Zone"]) for r in _rows(onet / "Job Zones.txt")}
    zone_text = {
        int(r["Job Zone"]): (r["Experience"], r["Education"])
        for r in _rows(onet / "Job Zone Reference.txt")
    }

    codes = sorted(code for code in titles if core.get(code) or supplemental.get(code))
    occupations = tuple(
        Occupation(
            code=code,
            title=titles[code],
            function=SOC_MAJOR_GROUPS.get(code[:2], "Other"),
            alternate_titles=tuple(alternate.get(code, ())),
            reported_titles=tuple(reported.get(code, ())),
            core_tasks=tuple(core.get(code, ())),
            supplemental_tasks=tuple(supplemental.get(code, ())),
            hot_technologies=tuple(hot.get(code, ())),
            other_technologies=tuple(other.get(code, ())),
            job_zone=zones.get(code, 3),
        )
        for code in codes
    )
    position = {o.code: i for i, o in enumerate(occupations)}
    tier_rank = {tier: rank for rank, tier in enumerate(RELATEDNESS_TIERS)}
    related: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for row in _rows(onet / "Related Occupations.txt"):
        code, related_code = row["O*NET-SOC Code"], row["Related O*NET-SOC Code"]
        if code in position and related_code in position and code != related_code:
            rank = tier_rank.get(row["Relatedness Tier"], len(RELATEDNESS_TIERS))
            related[position[code]].append((rank, int(row["Index"]), position[related_code]))
    return Catalogue(
        occupations=occupations,
        related=tuple(
            tuple(target for _, _, target in sorted(related.get(i, []))) for i in range(len(codes))
        ),
        job_zones=zone_text,
    )


def _rows(path: Path) -> Iterator[dict[str, str]]:
    if not path.is_file():
        raise ReferenceDataError(f"reference file missing: {path}")
    with open(path, encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)


def _grouped(path: Path, column: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for row in _rows(path):
        value = row[column].strip()
        if value and value != "n/a":
            groups[row["O*NET-SOC Code"]].append(value)
    return groups
