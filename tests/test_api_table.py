"""docs/apis.md's table of APIs served is the dispatch registry's, so it cannot go stale."""
from __future__ import annotations

from minibroker.broker import api_table


def test_readme_lists_every_api_served_with_its_versions():
    readme = api_table.README.read_text()
    assert api_table.in_readme(readme) == api_table.markdown(), \
        "README's API table is stale: run python -m minibroker.broker.api_table --write"


def test_table_rows_are_the_apiversions_answer():
    from minibroker.broker.dispatch import supported_versions
    rows = [line.split(" | ") for line in api_table.markdown().splitlines()
            if line[:3].strip("| ").isdigit()]
    assert [(int(r[0].strip("| ")), *map(int, r[2].split("-"))) for r in rows] == \
        supported_versions(control_plane=True)
