#ifndef ARBOR_CLZ4_SHIM_H
#define ARBOR_CLZ4_SHIM_H
#include <lz4.h>
#endif
