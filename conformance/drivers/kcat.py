"""kcat 1.7 (Debian package ``kcat``, its own librdkafka), run as a subprocess.

Produce: records separated by a multi-byte delimiter (``-D``) with a multi-byte key delimiter
(``-K``), chosen so that neither occurs in the data (checked). kcat reports no offsets, so
``produce`` returns None. Consume: a binary-safe ``-f`` format: a header line
``partition offset keylen valuelen`` followed by the raw key and value bytes. kcat has no admin API.
"""
from __future__ import annotations

import json
import shutil
import subprocess

from conformance import rdlog

from . import DriverError

NAME = "kcat"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MISSING_CODECS: dict[str, str] = {}
HAS_ADMIN = False
HAS_IDEMPOTENCE = False

KEY_DELIM = b"\x1d\x1fMB-KEY\x1f\x1d"
REC_DELIM = b"\x1e\x1fMB-REC\x1f\x1e"
FORMAT = "%p %o %K %S\\n%k%s"


def binary() -> str | None:
    return shutil.which("kcat") or shutil.which("kafkacat")


def available() -> str | None:
    return None if binary() else "kcat is not installed (run conformance/install.sh)"


def _run(args: list, timeout: float, stdin: bytes | None = None) -> bytes:
    exe = binary()
    if exe is None:
        raise DriverError("kcat not installed")
    try:
        proc = subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise DriverError(f"kcat {args[:4]} did not exit within {timeout}s") from e
    for line in proc.stderr.decode(errors="replace").splitlines():
        rdlog.note(line)                # its librdkafka's protocol errors fail the test
    if proc.returncode != 0:
        raise DriverError(f"kcat {args[:4]} rc={proc.returncode}: "
                          f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.stdout


def produce(bs, topic, records, codec, acks="all", idempotent=False, timeout: float = 60):
    if idempotent:
        raise NotImplementedError("kcat idempotent producer is not covered")
    for k, v in records:
        for part in (k, v):
            if part is not None and (KEY_DELIM in part or REC_DELIM in part):
                raise ValueError("record contains a kcat delimiter")
    data = b"".join(k + KEY_DELIM + v + REC_DELIM for k, v in records)
    _run(["-b", bs, "-P", "-t", topic, "-K", KEY_DELIM, "-D", REC_DELIM, "-z", codec,
          "-X", f"acks={'-1' if acks == 'all' else acks}",
          "-X", f"message.timeout.ms={int(timeout * 1000) - 5000}", "-q"],
         timeout, stdin=data)
    return None


def _parse(out: bytes) -> list:
    res = []
    i = 0
    while i < len(out):
        nl = out.index(b"\n", i)
        p, o, klen, vlen = (int(x) for x in out[i:nl].split())
        i = nl + 1
        key = None if klen < 0 else out[i:i + klen]
        i += max(klen, 0)
        value = None if vlen < 0 else out[i:i + vlen]
        i += max(vlen, 0)
        res.append((p, o, key, value))
    return res


def consume_assigned(bs, topic, partitions, expected_count, timeout: float = 30):
    out = []
    for p in partitions:
        raw = _run(["-b", bs, "-C", "-t", topic, "-p", str(p), "-o", "beginning", "-e", "-q",
                    "-f", FORMAT, "-c", str(expected_count)], timeout)
        out.extend(_parse(raw))
    return out


def partition_count(bs, topic, timeout: float = 30) -> int:
    md = json.loads(_run(["-b", bs, "-L", "-t", topic, "-J", "-m", str(int(timeout))], timeout + 5))
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    if t.get("error"):
        raise DriverError(f"metadata {topic}: {t['error']}")
    return len(t["partitions"])


def list_offsets(bs, topic, timeout: float = 30):
    n = partition_count(bs, topic, timeout)
    res: dict[int, list] = {p: [None, None] for p in range(n)}
    for ts, idx in ((-2, 0), (-1, 1)):
        args = ["-b", bs, "-Q", "-J"]
        for p in range(n):
            args += ["-t", f"{topic}:{p}:{ts}"]
        out = json.loads(_run(args, timeout))
        for key, val in out[topic].items():
            if key == "topic":
                continue
            if "error" in val:
                raise DriverError(f"kcat -Q {topic}:{key}:{ts}: {val['error']}")
            res[int(val["partition"])][idx] = val["offset"]
    return {p: tuple(v) for p, v in res.items()}
