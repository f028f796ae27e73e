"""Kafka release emulation (`serve --kafka-version X.Y`, `ClusterConfig.kafka_version`).

A release's table (schemas/releases/<X.Y>.json, generated from Kafka's message definitions at the
release's tag by schemas/releases/generate.py) is the API keys and version ranges its brokers
advertised. A broker emulating it serves each API it shares with the release at the intersection
of the two ranges, advertises exactly those, and treats anything else as that release's broker
did: a key it does not advertise, or a version outside the range, closes the connection
(Kafka's SocketServer: "Received request api key X with version Y which is not enabled" is an
InvalidRequestException, which closes the channel) — except ApiVersions, answered at v0 with
UNSUPPORTED_VERSION and the ranges (KIP-511).

Where the release advertised a version minibroker does not serve, the intersection is
advertised and the difference is a gap (`gaps()`, listed in docs/kafka-releases.md):

    python -m minibroker.broker.releases            # print that page
    python -m minibroker.broker.releases --write    # rewrite docs/kafka-releases.md
"""
from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import sys
from dataclasses import dataclass

import minibroker.broker.handlers  # noqa: F401 — registers every handler before a table is built
from minibroker.broker.context import Handler
from minibroker.broker.dispatch import HANDLERS, INTER_BROKER_KEYS
from minibroker.config import emulated_releases
from minibroker.protocol.schemas import SCHEMAS_DIR

RELEASES_DIR = SCHEMAS_DIR / "releases"
# Our own API keys (KIP drafts, fault control) start here: served, never advertised by a release.
PRIVATE_KEYS_FROM = 1000


@dataclass(frozen=True)
class Release:
    version: str                               # "2.8"
    source: str                                # where the table came from
    apis: dict[int, tuple[int, int]]           # api key → (min, max) the release advertised
    names: dict[int, str]

    @property
    def major_minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)


@functools.cache
def load(version: str) -> Release:
    path = RELEASES_DIR / f"{version}.json"
    if version not in emulated_releases():
        raise ValueError(f"Invalid value {version} for kafka version: emulated releases are "
                         + ", ".join(emulated_releases()))
    data = json.loads(path.read_text())
    apis = {int(k): (v["min"], v["max"]) for k, v in data["apis"].items()}
    names = {int(k): v["name"] for k, v in data["apis"].items()}
    return Release(data["release"], data["source"], apis, names)


def handlers_for(release: Release, handlers: dict[int, Handler]) -> dict[int, Handler]:
    """The dispatch table of a broker emulating `release`: each served API the release shares,
    with its versions narrowed to both ranges; inter-broker and private keys are kept (they are
    not what a client listener advertises)."""
    out: dict[int, Handler] = {}
    for key, h in sorted(handlers.items()):
        if key in INTER_BROKER_KEYS:
            out[key] = h            # our controller's channel, whatever the release (KIP-291)
        elif key >= PRIVATE_KEYS_FROM:
            out[key] = dataclasses.replace(h, advertised=False)
        elif key in release.apis:
            lo, hi = release.apis[key]
            lo, hi = max(lo, h.versions[0]), min(hi, h.versions[1])
            if lo <= hi:
                out[key] = dataclasses.replace(h, versions=(lo, hi))
    return out


@functools.cache
def dispatch_table(version: str) -> dict[int, Handler]:
    """The one table of every broker emulating `version` (built once, after every handler has
    registered: ApiVersions caches its encoded answer per table)."""
    return handlers_for(load(version), HANDLERS)


# (key, name, release's range, advertised range or None)
Gap = tuple[int, str, tuple[int, int], tuple[int, int] | None]


def gaps(version: str) -> list[Gap]:
    """(key, name, release's range, advertised range or None) for each API of the release whose
    range minibroker does not serve whole on a client listener."""
    release, served = load(version), dispatch_table(version)
    out: list[Gap] = []
    for key, rng in sorted(release.apis.items()):
        h = served.get(key)
        ours = None if h is None or key in INTER_BROKER_KEYS else h.versions
        if ours != rng:
            out.append((key, release.names[key], rng, ours))
    return out


def consumer_group_protocol(version: str | None) -> bool:
    """Whether a broker of `version` (None: minibroker's own) serves KIP-848 consumer groups:
    3.7-3.9 advertised ConsumerGroupHeartbeat v0 but refused it with UNSUPPORTED_VERSION unless
    group.coordinator.rebalance.protocols named "consumer" (its default was "classic")."""
    return version is None or load(version).major_minor >= (4, 0)


DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "kafka-releases.md"


def _rng(r: tuple[int, int] | None) -> str:
    return "—" if r is None else f"{r[0]}-{r[1]}"


def markdown() -> str:
    lines = ["# Emulated Kafka releases", "",
             "Generated by `python -m minibroker.broker.releases --write` from schemas/releases/ "
             "(tables generated by schemas/releases/generate.py from Kafka's message definitions "
             "at each release tag). `serve --kafka-version X.Y` advertises each release's ranges "
             "narrowed to what minibroker serves; these are the differences (— : not "
             "advertised, a request for it closes the connection).", ""]
    for version in emulated_releases():
        release = load(version)
        lines += [f"## {version}", "", f"Source: {release.source}.", "",
                  "| key | API | Kafka | minibroker |", "| --- | --- | --- | --- |"]
        lines += [f"| {k} | {name} | {_rng(rng)} | {_rng(ours)} |"
                  for k, name, rng, ours in gaps(version)]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        DOC.write_text(markdown())
    else:
        print(markdown())


def transaction_verification(version: str | None) -> bool:
    """Whether a broker of `version` checks that a transactional Produce's partitions are in the
    transaction (KIP-890 part 1, transaction.partition.verification.enable, on from 3.6): before
    it, Kafka appended the batch anyway and the transaction could hang."""
    return version is None or load(version).major_minor >= (3, 6)
