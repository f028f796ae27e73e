"""Transparent huge pages for glibc's main heap, where a served broker's batches live.

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
"""
from __future__ import annotations

import ctypes

_M_TOP_PAD = -2                  # glibc's mallopt parameter: extra bytes per heap extension
_TOP_PAD = 64 * 1024 * 1024
_CHECK_EVERY = 1024 * 1024
_MADV_HUGEPAGE = 14
_PAGE = 4096
_THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


class HugePageHeap:
    def __init__(self) -> None:
        self.on = False
        self.unchecked = 0          # bytes stored since the break was last looked at
        self.advised_end = 0        # the heap below this is advised
        self._sbrk = self._madvise = None

    def enable(self) -> bool:
        """Advise the heap from its current end on. False (and nothing changed) where the kernel
        does not grant huge pages on request or the C library is not glibc on Linux."""
        try:
            with open(_THP_ENABLED) as f:
                mode = f.read()
            libc = ctypes.CDLL(None)
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
        end = self._sbrk(0) // _PAGE * _PAGE
        grown = end - self.advised_end
        if grown <= 0:
            return 0
        # The range is within the heap's mapping, so this fails only where THP is unsupported,
        # which `enable` ruled out; a failure leaves 4 KiB pages, nothing worse.
        self._madvise(self.advised_end, grown, _MADV_HUGEPAGE)
        self.advised_end = end
        return grown


HEAP = HugePageHeap()
