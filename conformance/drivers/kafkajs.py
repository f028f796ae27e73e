"""kafkajs 2.2.4 (npm), run as ``node drivers/node/driver.js`` with a JSON command on stdin.

Codecs: gzip is built in; snappy comes from kafkajs-snappy, lz4 from lz4js and zstd from zstd-codec
(all from npm, pure JS/wasm), registered in driver.js. kafkajs has no manual partition assignment, so
``consume_assigned`` reads through a fresh one-member consumer group.
"""
from __future__ import annotations

import base64
import json
import pathlib
import shutil
import subprocess

from . import DriverError

NAME = "kafkajs"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MISSING_CODECS: dict[str, str] = {}
HAS_ADMIN = True
HAS_IDEMPOTENCE = False  # kafkajs' idempotent producer is marked experimental; not in scope

NODE_DIR = pathlib.Path(__file__).parent / "node"
DRIVER = NODE_DIR / "driver.js"


def available() -> str | None:
    """None when usable, else why not."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_DIR / "node_modules" / "kafkajs").is_dir():
        return f"kafkajs is not installed in {NODE_DIR} (run conformance/install.sh)"
    return None


def _b64(b: bytes | None):
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s):
    return None if s is None else base64.b64decode(s)


def _call(op: str, bs: str, timeout: float, **args):
    cmd = {"op": op, "bootstrap": bs, "timeout": timeout, **args}
    try:
        proc = subprocess.run(["node", str(DRIVER)], input=json.dumps(cmd).encode(),
                              capture_output=True, timeout=timeout + 10, cwd=NODE_DIR)
    except subprocess.TimeoutExpired as e:
        raise DriverError(f"kafkajs {op}: node did not exit within {timeout + 10}s") from e
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if not lines:
        raise DriverError(f"kafkajs {op}: no output (rc={proc.returncode}); stderr: "
                          f"{proc.stderr.decode(errors='replace')[-2000:]}")
    res = json.loads(lines[-1])
    if not res["ok"]:
        raise DriverError(f"kafkajs {op}: {res['error']}; stderr: "
                          f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return res["result"]


def create_topic(bs, name, partitions, rf, configs=None, timeout: float = 30) -> None:
    _call("create_topic", bs, timeout, topic=name, partitions=partitions, rf=rf,
          configs=configs or {})


def produce(bs, topic, records, codec, acks="all", idempotent=False, timeout: float = 60):
    if idempotent:
        raise NotImplementedError("kafkajs idempotent producer is not covered")
    res = _call("produce", bs, timeout, topic=topic, codec=codec, acks=acks,
                records=[[_b64(k), _b64(v)] for k, v in records])
    return [tuple(x) for x in res]


def consume_assigned(bs, topic, partitions, expected_count, timeout: float = 30):
    res = _call("consume_assigned", bs, timeout, topic=topic, partitions=list(partitions),
                expected_count=expected_count)
    return [(p, o, _unb64(k), _unb64(v)) for p, o, k, v in res]


def list_offsets(bs, topic, timeout: float = 30):
    res = _call("list_offsets", bs, timeout, topic=topic)
    return {int(p): tuple(v) for p, v in sorted(res.items(), key=lambda kv: int(kv[0]))}


def partition_count(bs, topic, timeout: float = 30) -> int:
    return _call("partition_count", bs, timeout, topic=topic)


def describe_configs(bs, topic, timeout: float = 30) -> dict[str, str]:
    return _call("describe_configs", bs, timeout, topic=topic)


def create_partitions(bs, topic, total, timeout: float = 30) -> None:
    _call("create_partitions", bs, timeout, topic=topic, total=total)


def delete_topic(bs, topic, timeout: float = 30) -> None:
    _call("delete_topic", bs, timeout, topic=topic)


def list_topics(bs, timeout: float = 30) -> set[str]:
    return set(_call("list_topics", bs, timeout))


# ------------------------------------------------------------------ consumer groups
def group_scenario(bs, topic, group, batches, members: int = 3, step_timeout: float = 30,
                   partitions: int = 6, timeout: float = 100) -> dict:
    """Run driver.js ``group_scenario``: ``members`` kafkajs consumers in one node process (see
    the op's comment and conformance/test_groups.py). Returns the JSON trace: ``produced`` per
    batch, ``consumed`` [(seq, member, partition, offset, key b64, value b64)], ``commits``
    [(seq, member, {partition: offset})], ``stable_a``/``stable_b`` {member: partitions},
    ``group_a``/``group_b`` (DescribeGroups), ``leave_seq``, ``left``, ``new_seq``,
    ``ends_before_new``, ``committed_before_new``, ``new_assignment``."""
    return _call("group_scenario", bs, timeout, topic=topic, group=group, members=members,
                 partitions=partitions, step_timeout=step_timeout,
                 batches=[[[_b64(k), _b64(v)] for k, v in b] for b in batches])
