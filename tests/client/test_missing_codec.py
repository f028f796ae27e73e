"""A compression.type whose library is missing fails at configuration, naming the extra to install
(it used to leave every send future unresolved: the sender failed to encode the batch)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from minibroker.client.records import codec_id

# Run with the codec libraries made unimportable (sys.modules[name] = None) before kafka.codec loads.
_SCRIPT = textwrap.dedent("""
    import sys, time
    for name in ("zstandard", "lz4", "lz4.frame", "lz4f", "lz4framed", "snappy", "cramjam"):
        sys.modules[name] = None
    from minibroker.client import Producer
    from minibroker.client.records import CodecNotInstalledError
    from minibroker.spark.sink import parse_sink
    for codec, package in (("zstd", "zstandard"), ("lz4", "lz4"), ("snappy", "python-snappy")):
        t0 = time.monotonic()
        for make in (lambda: Producer("127.0.0.1:1", compression=codec),
                     lambda: parse_sink({"kafka.bootstrap.servers": "127.0.0.1:1",
                                         "kafka.compression.type": codec})):
            try:
                make()
            except CodecNotInstalledError as e:
                assert package in str(e) and "pip install 'minibroker[codecs]'" in str(e), str(e)
            else:
                raise SystemExit(f"{codec}: no error")
        assert time.monotonic() - t0 < 5
    Producer("127.0.0.1:1", compression="gzip")        # the stdlib codec needs nothing
    print("OK")
""")


def test_missing_codec_is_an_immediate_error_naming_the_extra():
    pytest.importorskip("pyarrow")          # parse_sink's module imports pyarrow
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


def test_installed_codecs_are_accepted():
    assert [codec_id(c) for c in ("gzip", "snappy", "lz4", "zstd", None)] == [1, 2, 3, 4, 0]
