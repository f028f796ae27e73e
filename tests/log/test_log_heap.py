"""With minibroker.log.heap.huge.pages=true a served broker's heap is advised MADV_HUGEPAGE as the
logs grow it (minibroker/log/heap.py), and each extension is faulted in ahead of use by a
background thread, so produces do not wait on faults. Off by default, and then nothing is advised."""
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
    assert keep_freed_batches_for_reuse(huge_pages=True) and HEAP.on
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


# Stores 8 MB, which grows the heap by at least _TOP_PAD, then waits (bounded) until the heap is
# resident well past what was stored: only the prefaulting thread touches the rest.
_PREFAULT_CHILD = textwrap.dedent("""
    import time
    from minibroker.log import heap
    from minibroker.log.heap import HEAP
    from minibroker.log.memory import LogMemory, keep_freed_batches_for_reuse
    assert keep_freed_batches_for_reuse(huge_pages=True) and HEAP.on

    def heap_rss():                            # advising splits the heap into several VMAs
        rss, in_heap = 0, False
        with open("/proc/self/smaps") as f:
            for line in f:
                if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
                    in_heap = line.rstrip().endswith("[heap]")
                elif in_heap and line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
        return rss

    before = heap_rss()
    memory = LogMemory()
    batches = []
    for _ in range(8):
        batches.append(bytearray(1000000))
        memory.stored(1000000)
    deadline = time.monotonic() + 20
    while heap_rss() - before < heap._TOP_PAD // 2 and HEAP.prefaulting and time.monotonic() < deadline:
        time.sleep(0.01)
    print(int(HEAP.prefaulting), heap_rss() - before)
""")

_GLIBC_THP = pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists(THP)
                                or "[never]" in open(THP).read(),
                                reason="glibc on a kernel that grants transparent huge pages on request")


def _child(code: str) -> str:
    # A child process: enabling changes glibc's malloc settings for the whole process.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    return out.stdout


@_GLIBC_THP
def test_the_heap_a_log_grows_is_advised_huge_pages():
    out = _child(_CHILD)
    advised, unadvised = map(int, out.split())
    assert advised >= 150 * 1000000 and unadvised == 0


@_GLIBC_THP
def test_each_extension_is_faulted_in_ahead_of_the_logs():
    prefaulting, resident = map(int, _child(_PREFAULT_CHILD).split())
    if not prefaulting:
        pytest.skip("the kernel predates MADV_POPULATE_WRITE (Linux 5.14)")
    assert resident >= 32 * 1024 * 1024, resident      # 8 MB stored; the rest was prefaulted


def test_by_default_nothing_is_advised():
    out = _child("from minibroker.log.heap import HEAP\n"
                 "from minibroker.log.memory import keep_freed_batches_for_reuse\n"
                 "kept = keep_freed_batches_for_reuse()\n"
                 "print(int(kept), int(HEAP.on))")
    kept, on = map(int, out.split())
    assert on == 0 and kept == (platform.libc_ver()[0] == "glibc")
