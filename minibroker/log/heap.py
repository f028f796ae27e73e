"""Transparent huge pages for glibc's main heap, where a served broker's batches live.

Opt-in (`--override minibroker.log.heap.huge.pages=true`): re-measured on 2026-11-27 on this VM,
the 3-broker README serve moved 10 KiB produce at 0.56x the librdkafka mock with it and 1.09x
without, and a fresh broker's 100 B produce cost twice the CPU (docs/performance.md). What
follows is the case made for it when it was on by default.

A served broker keeps its batches on glibc's heap (memory.keep_freed_batches_for_reuse) and, past
log.memory.max.bytes, reuses the memory of the oldest batches: a stream of writes through up to the
whole cap. With 4 KiB pages, writing that stream cost the *client* on the other core 5-15% of its
throughput here (a memcpy loop through a 1 GiB ring beside the librdkafka mock did the same to the
mock's client; through a 1 GiB ring of 2 MiB pages it did not), and faulting reused memory in
costs ~0.4 s per GiB against ~0.07 s in huge pages (memory the host has not backed yet costs
more in huge pages: benchmarks/README.md, seventh round). So, where the kernel grants huge pages
on request (`transparent_hugepage/enabled` is `madvise` or `always`), the heap is advised
MADV_HUGEPAGE as it grows: glibc grows it by `_TOP_PAD` at a time, and the logs report every
`_CHECK_EVERY` bytes they store, so all but the first batch or two of each extension is faulted
in as huge pages.
glibc's own switch for this (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) is read only at process start.

Each extension is then faulted in ahead of use by a thread of the lowest priority (SCHED_IDLE),
with MADV_POPULATE_WRITE (Linux 5.14+: faults pages in without touching their contents, so it is
safe beside malloc). A fresh huge page cost ~2-3 ms to fault on this VM (the host backs it on
first touch), and a produce that faulted it waited that long: during a fresh broker's first GiB,
produce round trips were 0.5-3 ms at the median where the librdkafka mock's were 0.2, the
producing client's memory churned with them, and its loss probes fired. Faulted while the event
loop waits, the median stayed at 0.3 ms (benchmarks/README.md, tenth round). The cost: up to one
extension (`_TOP_PAD`) resident before the logs fill it, once they store bytes at all.
"""
from __future__ import annotations

import ctypes
import os
import queue
import threading
from typing import Callable

_M_TOP_PAD = -2                  # glibc's mallopt parameter: extra bytes per heap extension
_TOP_PAD = 64 * 1024 * 1024
_CHECK_EVERY = 1024 * 1024
_MADV_HUGEPAGE = 14
_MADV_POPULATE_WRITE = 23
_EINVAL = 22
_PREFAULT_STEP = 2 * 1024 * 1024   # one huge page per call: the mmap lock a brk waits on is held that long
_PAGE = 4096
_THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


class HugePageHeap:
    def __init__(self) -> None:
        self.on = False
        self.unchecked = 0          # bytes stored since the break was last looked at
        self.advised_end = 0        # the heap below this is advised
        self._sbrk: Callable[[int], int] | None = None
        self._madvise: Callable[[int, int, int], int] | None = None
        # ranges for the prefaulting thread
        self._prefault: queue.SimpleQueue[tuple[int, int]] | None = None
        self.prefaulting = True     # until the kernel turns MADV_POPULATE_WRITE down

    def enable(self) -> bool:
        """Advise the heap from its current end on. False (and nothing changed) where the kernel
        does not grant huge pages on request or the C library is not glibc on Linux."""
        try:
            with open(_THP_ENABLED) as f:
                mode = f.read()
            libc = ctypes.CDLL(None, use_errno=True)
            sbrk, madvise, mallopt = libc.sbrk, libc.madvise, libc.mallopt
        except (OSError, AttributeError):
            return False
        if "[never]" in mode:
            return False
        sbrk.restype, sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
        madvise.restype, madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if not mallopt(_M_TOP_PAD, _TOP_PAD):
            return False
        self._sbrk, self._madvise = sbrk, madvise
        self.advised_end = sbrk(0) // _PAGE * _PAGE
        self.on = True
        return True

    def stored(self, size: int) -> None:
        self.unchecked += size
        if self.unchecked >= _CHECK_EVERY:
            self.advise_growth()

    def advise_growth(self) -> int:
        """Advise whatever the heap grew by since the last call; returns those bytes."""
        self.unchecked = 0
        assert self._sbrk is not None and self._madvise is not None, "enable() found them"
        end: int = self._sbrk(0) // _PAGE * _PAGE
        grown = end - self.advised_end
        if grown <= 0:
            return 0
        # The range is within the heap's mapping, so this fails only where THP is unsupported,
        # which `enable` ruled out; a failure leaves 4 KiB pages, nothing worse.
        self._madvise(self.advised_end, grown, _MADV_HUGEPAGE)
        if self.prefaulting:
            if self._prefault is None:
                self._prefault = queue.SimpleQueue()
                threading.Thread(target=self._prefaulter, name="heap-prefault", daemon=True).start()
            self._prefault.put((self.advised_end, end))
        self.advised_end = end
        return grown

    def _prefaulter(self) -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))     # 0: this thread
        except (OSError, AttributeError):
            pass                    # then at normal priority; the faults still leave the loop
        madvise, ranges = self._madvise, self._prefault
        assert madvise is not None and ranges is not None, "started by advise_growth"
        while True:
            start, end = ranges.get()
            for addr in range(start, end, _PREFAULT_STEP):
                if madvise(addr, min(_PREFAULT_STEP, end - addr), _MADV_POPULATE_WRITE):
                    if ctypes.get_errno() == _EINVAL:
                        self.prefaulting = False        # a kernel before 5.14
                        return
                    break           # trimmed meanwhile (ENOMEM): the rest of the range is gone


HEAP = HugePageHeap()
