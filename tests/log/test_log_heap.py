"""A served broker's heap is advised MADV_HUGEPAGE as the logs grow it (minibroker/log/heap.py):
writing a log's stream through 4 KiB pages slowed the client on the other core by 5-15%."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

THP = "/sys/kernel/mm/transparent_hugepage/enabled"

_CHILD = textwrap.dedent("""
    from minibroker.log.heap import HEAP
    from minibroker.log.memory import LogMemory, keep_freed_batches_for_reuse
    assert keep_freed_batches_for_reuse() and HEAP.on
    start = HEAP.advised_end
    memory = LogMemory()
    batches = []
    for _ in range(200):                       # 200 MB of 1 MB batches, as a produce stores them
        batches.append(bytearray(1000000))
        memory.stored(1000000)
    assert HEAP.advised_end - start >= 150 * 1000000, HEAP.advised_end - start
    advised = unadvised = 0
    with open("/proc/self/smaps") as f:
        vma = None
        for line in f:
            if "[heap]" in line:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                vma = (lo, hi)
            elif line.startswith("VmFlags:") and vma is not None:
                lo, hi = max(vma[0], start), min(vma[1], HEAP.advised_end)
                if hi > lo:
                    if " hg" in line:
                        advised += hi - lo
                    else:
                        unadvised += hi - lo
                vma = None
    print(advised, unadvised)
""")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists(THP)
                    or "[never]" in open(THP).read(),
                    reason="glibc on a kernel that grants transparent huge pages on request")
def test_the_heap_a_log_grows_is_advised_huge_pages():
    # A child process: enabling changes glibc's malloc settings for the whole process.
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    advised, unadvised = map(int, out.stdout.split())
    assert advised >= 150 * 1000000 and unadvised == 0
