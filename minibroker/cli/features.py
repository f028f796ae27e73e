"""`minibroker features` — kafka-features.sh describe (KIP-584 feature flags from ApiVersions).

    minibroker features --bootstrap-server 127.0.0.1:9092 describe

Prints each feature a broker supports with its finalized level and the finalized features epoch
(broker/features.py), as Kafka's FeatureCommand. minibroker's levels are fixed: upgrade,
downgrade and disable are refused, and so are version-mapping and feature-dependencies (they
describe Kafka releases' levels, which minibroker does not move between).
"""
from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import check_refused, refuse_bootstrap_controller, refuse_command
from minibroker.client.admin import Admin

_FIXED = "minibroker has no feature levels to change: they are fixed by its release"
_NO_MAPPING = "minibroker does not map Kafka release versions to feature levels"
# metadata.version's levels as Kafka's MetadataVersion names them (levelToString).
_RELEASES = ("3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3",
             "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2",
             "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0",
             "4.0-IV0", "4.0-IV1", "4.0-IV2", "4.0-IV3")


def add_features_parser(sub) -> None:
    p = add_admin_tool_parser(sub, "features", __doc__,
                              "the feature flags (metadata.version, ...) and their levels", _main,
                              check=check_refused)
    refuse_bootstrap_controller(p)
    cmd = p.add_subparsers(dest="features_command", required=True, metavar="COMMAND")
    cmd.add_parser("describe", help="Describes the current active feature flags.")
    for name in ("upgrade", "downgrade"):
        refuse_command(cmd, name, _FIXED, "--metadata", "--release-version", "--feature",
                       switches=("--unsafe", "--dry-run") if name == "downgrade" else
                       ("--dry-run",))
    refuse_command(cmd, "disable", _FIXED, "--feature", switches=("--unsafe", "--dry-run"))
    refuse_command(cmd, "version-mapping", _NO_MAPPING, "--release-version")
    refuse_command(cmd, "feature-dependencies", _NO_MAPPING, "--feature")


def level_to_string(feature: str, level: int) -> str:
    if feature == "metadata.version":
        return _RELEASES[level - 1] if 1 <= level <= len(_RELEASES) else f"UNKNOWN {level}"
    return str(level)


async def _main(admin: Admin, args) -> None:
    _, conn = await admin.pool.any_connection()
    version = admin.pool.version(conn, ApiVersionsRequest, lo=3)
    resp = await conn.request(ApiVersionsRequest(client_software_name="minibroker",
                                                 client_software_version="features"), version)
    finalized = {f.name: f.max_version_level for f in resp.finalized_features or ()}
    epoch = resp.finalized_features_epoch
    for f in sorted(resp.supported_features or (), key=lambda f: f.name):
        print(f"Feature: {f.name}\t"
              f"SupportedMinVersion: {level_to_string(f.name, f.min_version)}\t"
              f"SupportedMaxVersion: {level_to_string(f.name, f.max_version)}\t"
              f"FinalizedVersionLevel: {level_to_string(f.name, finalized.get(f.name, 0))}\t"
              f"Epoch: {epoch if epoch >= 0 else '-'}")
