// The SQLite C API from the system (Debian: libsqlite3-dev), for the benchmarks' peer workloads.
#include <sqlite3.h>
