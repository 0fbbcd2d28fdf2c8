#ifndef ARBOR_CLZ4_SHIM_H
#define ARBOR_CLZ4_SHIM_H
#include <lz4.h>

/// Asks the processor to bring `count` bytes from `start` into its caches, last line first (a
/// hint: it never faults and changes nothing). The engine's one use of C outside LZ4: Swift has
/// no prefetch instruction. A scan asks for a leaf's cells, which it reads from the end of the
/// page downwards, and for the next leaf (docs/architecture.md, "Page cache").
static inline void arbor_prefetch_range(const void *start, long count) {
    if (count <= 0) return;
    unsigned long first = (unsigned long)start & ~63UL;
    unsigned long line = ((unsigned long)start + (unsigned long)count - 1) & ~63UL;
    for (;; line -= 64) {
        __builtin_prefetch((const void *)line, 0, 3);
        if (line == first) break;
    }
}
#endif
