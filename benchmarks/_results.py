"""What the benchmarks that keep their output share: the text printed and written to
benchmarks/results/NAME, so a later run can be compared with the committed one."""
from __future__ import annotations

import pathlib

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def publish(name: str, lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(text)
    print(text, end="")
