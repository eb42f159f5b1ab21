"""The data's last date: `ingest.last_date`, else the export's `raw/export.json`, else today."""

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from jobrec_core.config import load_config
from jobrec_core.data.stage import data_last_date
from jobrec_core.platform.quarantine import DataQualityError
from jobrec_core.platform.tables import RawLocations


def config(root: Path, *overrides: str):
    return load_config("local", [f"storage.root={root}", "data.preset=tiny", *overrides], None)


def write_export(settings, content: str) -> Path:
    export = Path(RawLocations.of(settings).export)
    export.parent.mkdir(parents=True, exist_ok=True)
    export.write_text(content)
    return export


def test_the_setting_comes_first(tmp_path):
    settings = config(tmp_path, "ingest.last_date=2025-09-30")
    write_export(settings, json.dumps({"last_date": "2025-10-31"}))
    assert data_last_date(settings) == (date(2025, 9, 30), "ingest.last_date")


def test_else_the_export_says_it(tmp_path):
    settings = config(tmp_path)
    export = write_export(settings, json.dumps({"last_date": "2025-10-31"}))
    assert RawLocations.of(settings).export.endswith("/tiny/raw/export.json")
    assert data_last_date(settings) == (date(2025, 10, 31), str(export))


def test_else_it_is_today_in_utc(tmp_path):
    before = datetime.now(UTC).date()
    last, source = data_last_date(config(tmp_path))
    assert before <= last <= datetime.now(UTC).date()
    assert source.startswith("today (UTC)")


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"end": "2025-10-31"}),
        json.dumps({"last_date": "2025-10-1"}),
        json.dumps({"last_date": "20251031"}),
        json.dumps({"last_date": "2025-02-30"}),
        json.dumps({"last_date": None}),
        json.dumps(["2025-10-31"]),
    ],
)
def test_an_export_without_a_date_is_refused(tmp_path, content):
    settings = config(tmp_path)
    write_export(settings, content)
    with pytest.raises(DataQualityError, match=r"export\.json: expected \{\"last_date\""):
        data_last_date(settings)
