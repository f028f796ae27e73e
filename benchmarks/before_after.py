#!/usr/bin/env python3
"""The README's `serve` at an earlier commit beside this checkout, in one run (issue 40: a
restructuring must leave no row of run.py slower by more than the noise).

    python benchmarks/before_after.py --before 9385743 [--repeat 3] [--duration 10]
                                      [--after-override NAME=VALUE ...]

Uses ../shared/perf's anchor.py and load.py as run.py does (run.py's interleaved rounds: round r
runs both brokers, in reverse order on odd rounds). The earlier commit is checked out in a
temporary git worktree; both run `python -m minibroker serve --port 0` from their own tree with
this machine's venv. Prints, per row of run.py, the median before and after, after/before, and the
noise: the largest spread between one broker's own rounds, as a share of its median. A row is
flagged only when after is worse than before by more than that noise.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _run_py():
    spec = importlib.util.spec_from_file_location("bench_run", os.path.join(HERE, "run.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _spread(values: list) -> float:
    vals = [v for v in values if v]
    if len(vals) < 2:
        return 0.0
    return (max(vals) - min(vals)) / statistics.median(vals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a commit of this repository")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--max-bytes", type=float, default=2e10)
    ap.add_argument("--after-override", action="append", default=[], metavar="NAME=VALUE",
                    help="also run this checkout with these serve overrides, in the same rounds "
                         "(e.g. log.memory.overflow=delete: the earlier commit's semantics)")
    a = ap.parse_args()
    run = _run_py()
    venv_py = run.ensure_setup()
    with tempfile.TemporaryDirectory(prefix="mb-before-") as tmp:
        tree = os.path.join(tmp, "before")
        subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", tree, a.before],
                       check=True, capture_output=True)
        try:
            serve = f"exec {shlex.quote(sys.executable)} -m minibroker serve --port 0"
            cmds = {"before": (f"cd {shlex.quote(tree)} && {serve}", {"MB_PERF_RF": "1"}),
                    "after": (f"cd {shlex.quote(REPO)} && {serve}", {"MB_PERF_RF": "1"})}
            if a.after_override:
                extra = " ".join(f"--override {shlex.quote(o)}" for o in a.after_override)
                cmds["after+"] = (f"cd {shlex.quote(REPO)} && {serve} {extra}", {"MB_PERF_RF": "1"})
            got = run.run_rounds(list(cmds), cmds, venv_py, a, tmp)
        finally:
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", tree],
                           capture_output=True)
    print(f"# README's serve at {a.before} (before) and at this checkout (after); {a.repeat} "
          f"interleaved rounds x {a.duration:g} s; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    _table(run, got, "after")
    if a.after_override:
        print(f"# beside it, not instead: this checkout with --override "
              f"{' --override '.join(a.after_override)} (after+)")
        _table(run, got, "after+")


def _table(run, got: dict, after: str) -> None:
    print(f"{'scenario':22} {'metric':12} {'before':>12} {after:>12} {after + '/before':>13} "
          f"{'noise':>7}")
    slower = 0
    for scenario, metric, higher in run.ROWS:
        b = got["before"]["median"].get(scenario, {}).get(metric)
        f = got[after]["median"].get(scenario, {}).get(metric)
        if not b or not f:
            print(f"{scenario:22} {metric:12} {'-':>12} {'-':>12}")
            continue
        key = f"{scenario}.{metric}"
        noise = max(_spread(got["before"]["rounds"][key]), _spread(got[after]["rounds"][key]))
        ratio = f / b
        worse = (1 - ratio) if higher else (ratio - 1)
        flag = "  SLOWER" if worse > noise else ""
        slower += bool(flag)
        print(f"{scenario:22} {metric:12} {b:12.1f} {f:12.1f} {ratio:13.2f} {noise:7.0%}{flag}")
    print(f"{slower} row(s) slower than before by more than the noise")


if __name__ == "__main__":
    main()
