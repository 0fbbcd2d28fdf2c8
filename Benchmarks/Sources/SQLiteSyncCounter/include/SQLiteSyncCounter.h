// A VFS wrapper around SQLite's default VFS (on Linux, "unix") that counts syncs.
//
// Everything is delegated to the default VFS unchanged; the wrapper only counts:
//
// - `journal`: xSync calls on rollback journals (files opened with SQLITE_OPEN_MAIN_JOURNAL);
// - `database`: xSync calls on main database files (SQLITE_OPEN_MAIN_DB);
// - `other`: xSync calls on any other file (WAL, super-journal, temporary files);
// - `directory`: fsyncs of a directory. The unix VFS does not issue these through xSync: inside
//   the first xSync of a journal it has just created (and in xDelete when asked to sync the
//   directory, at synchronous=EXTRA) it opens the directory through its `openDirectory` system
//   call and fsyncs it. The wrapper replaces that system call (xSetSystemCall) with one that
//   counts each successful open; every such open is followed by exactly one fsync. When the
//   default VFS has no `openDirectory` system call, `directoryCounted` is 0.
//
// So journal + database + directory + other is the number of fsync/fdatasync system calls the
// unix VFS made. The counters are process-wide (atomics) and count every connection that uses
// the VFS.
#ifndef ARBOR_SQLITE_SYNC_COUNTER_H
#define ARBOR_SQLITE_SYNC_COUNTER_H

#include <stdint.h>

/// Sync counts since the last reset.
typedef struct {
    uint64_t journal;
    uint64_t database;
    uint64_t directory;
    uint64_t other;
    /// 1 when directory fsyncs are counted (the default VFS exposes `openDirectory`), else 0.
    int directoryCounted;
} ArborSQLiteSyncCounts;

/// Registers the counting VFS under `name` (wrapping the default VFS at the first call), making it
/// the default when `makeDefault` is non-zero. Open connections with
/// `sqlite3_open_v2(path, &db, flags, name)` to use it. Idempotent for the same name.
///
/// Returns an SQLite result code (SQLITE_OK, SQLITE_ERROR when no default VFS exists, or
/// SQLITE_MISUSE when a different name was registered before). Call it before opening connections
/// that use it, from one thread.
int arbor_sqlite_sync_counter_register(const char *name, int makeDefault);

/// The counts since the last reset.
ArborSQLiteSyncCounts arbor_sqlite_sync_counter_read(void);

/// Sets every count to zero.
void arbor_sqlite_sync_counter_reset(void);

#endif
