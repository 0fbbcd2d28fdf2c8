#ifndef ARBOR_CLZ4_SHIM_H
#define ARBOR_CLZ4_SHIM_H
#include <lz4.h>

/// Asks the processor to bring `count` bytes from `start` into its caches, last line first (a
/// hint: it never faults and changes nothing). The engine's one use of C outside LZ4: Swift has
/// no prefetch instruction. A scan asks for a leaf's cells, which it reads from the end of the
/// page downwards, and for the next leaf (docs/architecture.md, "Page cache").
static inline void arbor_prefetch_range(const void *start, long count) {
    const char *p = (const char *)start;
    for (long i = count - 1; i >= 0; i -= 64) __builtin_prefetch(p + i, 0, 3);
}
#endif
