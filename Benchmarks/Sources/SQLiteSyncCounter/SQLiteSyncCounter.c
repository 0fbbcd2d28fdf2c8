// See include/SQLiteSyncCounter.h for what is counted.
#include "SQLiteSyncCounter.h"

#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

enum FileKind { KIND_OTHER = 0, KIND_JOURNAL = 1, KIND_DATABASE = 2 };

/// Our file: SQLite allocates szOsFile bytes; the real (unix) file lives right after this header.
typedef struct {
    sqlite3_file base;
    sqlite3_file *real;
    int kind;
} CountingFile;

static sqlite3_vfs countingVFS;
static sqlite3_vfs *rootVFS;
static char registeredName[64];

static _Atomic uint64_t journalSyncs;
static _Atomic uint64_t databaseSyncs;
static _Atomic uint64_t directorySyncs;
static _Atomic uint64_t otherSyncs;

// MARK: The openDirectory system call

typedef int (*OpenDirectoryFunction)(const char *, int *);
static OpenDirectoryFunction realOpenDirectory;

static int countingOpenDirectory(const char *path, int *fd) {
    int rc = realOpenDirectory(path, fd);
    // The unix VFS fsyncs the directory exactly once after every successful open.
    if (rc == SQLITE_OK) atomic_fetch_add(&directorySyncs, 1);
    return rc;
}

// MARK: File methods (all delegated)

#define REAL(file) (((CountingFile *)(file))->real)

static int cClose(sqlite3_file *f) {
    int rc = REAL(f)->pMethods->xClose(REAL(f));
    f->pMethods = NULL;
    return rc;
}
static int cRead(sqlite3_file *f, void *buf, int amount, sqlite3_int64 offset) {
    return REAL(f)->pMethods->xRead(REAL(f), buf, amount, offset);
}
static int cWrite(sqlite3_file *f, const void *buf, int amount, sqlite3_int64 offset) {
    return REAL(f)->pMethods->xWrite(REAL(f), buf, amount, offset);
}
static int cTruncate(sqlite3_file *f, sqlite3_int64 size) {
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int cSync(sqlite3_file *f, int flags) {
    switch (((CountingFile *)f)->kind) {
    case KIND_JOURNAL: atomic_fetch_add(&journalSyncs, 1); break;
    case KIND_DATABASE: atomic_fetch_add(&databaseSyncs, 1); break;
    default: atomic_fetch_add(&otherSyncs, 1); break;
    }
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int cFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int cLock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xLock(REAL(f), level); }
static int cUnlock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xUnlock(REAL(f), level); }
static int cCheckReservedLock(sqlite3_file *f, int *out) {
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int cFileControl(sqlite3_file *f, int op, void *arg) {
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int cSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int cDeviceCharacteristics(sqlite3_file *f) {
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int cShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}
static int cShmLock(sqlite3_file *f, int offset, int n, int flags) {
    return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void cShmBarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int cShmUnmap(sqlite3_file *f, int deleteFlag) {
    return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag);
}
static int cFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    return REAL(f)->pMethods->xFetch(REAL(f), offset, amount, out);
}
static int cUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *p) {
    return REAL(f)->pMethods->xUnfetch(REAL(f), offset, p);
}

static const sqlite3_io_methods methodsV1 = {
    1, cClose, cRead, cWrite, cTruncate, cSync, cFileSize, cLock, cUnlock, cCheckReservedLock,
    cFileControl, cSectorSize, cDeviceCharacteristics,
    NULL, NULL, NULL, NULL, NULL, NULL,
};
static const sqlite3_io_methods methodsV2 = {
    2, cClose, cRead, cWrite, cTruncate, cSync, cFileSize, cLock, cUnlock, cCheckReservedLock,
    cFileControl, cSectorSize, cDeviceCharacteristics,
    cShmMap, cShmLock, cShmBarrier, cShmUnmap, NULL, NULL,
};
static const sqlite3_io_methods methodsV3 = {
    3, cClose, cRead, cWrite, cTruncate, cSync, cFileSize, cLock, cUnlock, cCheckReservedLock,
    cFileControl, cSectorSize, cDeviceCharacteristics,
    cShmMap, cShmLock, cShmBarrier, cShmUnmap, cFetch, cUnfetch,
};

// MARK: VFS methods

static int vOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    (void)vfs;
    CountingFile *counting = (CountingFile *)file;
    counting->real = (sqlite3_file *)&counting[1];
    counting->kind = (flags & SQLITE_OPEN_MAIN_JOURNAL) ? KIND_JOURNAL
                   : (flags & SQLITE_OPEN_MAIN_DB) ? KIND_DATABASE
                   : KIND_OTHER;
    int rc = rootVFS->xOpen(rootVFS, name, counting->real, flags, outFlags);
    const sqlite3_io_methods *real = counting->real->pMethods;
    if (real == NULL) {
        // The open failed before the file existed: SQLite will not call xClose.
        file->pMethods = NULL;
        return rc;
    }
    file->pMethods = real->iVersion >= 3 ? &methodsV3 : real->iVersion == 2 ? &methodsV2 : &methodsV1;
    return rc;
}
static int vDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    return rootVFS->xDelete(rootVFS, name, syncDirectory);
}
static int vAccess(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    return rootVFS->xAccess(rootVFS, name, flags, out);
}
static int vFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return rootVFS->xFullPathname(rootVFS, name, size, out);
}
static void *vDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return rootVFS->xDlOpen(rootVFS, name);
}
static void vDlError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    rootVFS->xDlError(rootVFS, size, out);
}
static void (*vDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs;
    return rootVFS->xDlSym(rootVFS, handle, symbol);
}
static void vDlClose(sqlite3_vfs *vfs, void *handle) {
    (void)vfs;
    rootVFS->xDlClose(rootVFS, handle);
}
static int vRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return rootVFS->xRandomness(rootVFS, size, out);
}
static int vSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return rootVFS->xSleep(rootVFS, microseconds);
}
static int vCurrentTime(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    return rootVFS->xCurrentTime(rootVFS, out);
}
static int vGetLastError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return rootVFS->xGetLastError ? rootVFS->xGetLastError(rootVFS, size, out) : 0;
}
static int vCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    if (rootVFS->iVersion >= 2 && rootVFS->xCurrentTimeInt64) return rootVFS->xCurrentTimeInt64(rootVFS, out);
    double days = 0;
    int rc = rootVFS->xCurrentTime(rootVFS, &days);
    *out = (sqlite3_int64)(days * 86400000.0);
    return rc;
}
static int vSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr call) {
    (void)vfs;
    return rootVFS->iVersion >= 3 ? rootVFS->xSetSystemCall(rootVFS, name, call) : SQLITE_NOTFOUND;
}
static sqlite3_syscall_ptr vGetSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return rootVFS->iVersion >= 3 ? rootVFS->xGetSystemCall(rootVFS, name) : NULL;
}
static const char *vNextSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return rootVFS->iVersion >= 3 ? rootVFS->xNextSystemCall(rootVFS, name) : NULL;
}

// MARK: API

int arbor_sqlite_sync_counter_register(const char *name, int makeDefault) {
    if (name == NULL || strlen(name) >= sizeof(registeredName)) return SQLITE_MISUSE;
    if (rootVFS != NULL) {
        if (strcmp(name, registeredName) != 0) return SQLITE_MISUSE;
        return sqlite3_vfs_register(&countingVFS, makeDefault);
    }
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK) return rc;
    sqlite3_vfs *root = sqlite3_vfs_find(NULL);
    if (root == NULL) return SQLITE_ERROR;
    rootVFS = root;
    strcpy(registeredName, name);

    if (root->iVersion >= 3 && root->xGetSystemCall != NULL) {
        sqlite3_syscall_ptr original = root->xGetSystemCall(root, "openDirectory");
        if (original != NULL) {
            realOpenDirectory = (OpenDirectoryFunction)original;
            if (root->xSetSystemCall(root, "openDirectory", (sqlite3_syscall_ptr)countingOpenDirectory) != SQLITE_OK) {
                realOpenDirectory = NULL;
            }
        }
    }

    memset(&countingVFS, 0, sizeof countingVFS);
    countingVFS.iVersion = 3;
    countingVFS.szOsFile = (int)sizeof(CountingFile) + root->szOsFile;
    countingVFS.mxPathname = root->mxPathname;
    countingVFS.zName = registeredName;
    countingVFS.xOpen = vOpen;
    countingVFS.xDelete = vDelete;
    countingVFS.xAccess = vAccess;
    countingVFS.xFullPathname = vFullPathname;
    countingVFS.xDlOpen = vDlOpen;
    countingVFS.xDlError = vDlError;
    countingVFS.xDlSym = vDlSym;
    countingVFS.xDlClose = vDlClose;
    countingVFS.xRandomness = vRandomness;
    countingVFS.xSleep = vSleep;
    countingVFS.xCurrentTime = vCurrentTime;
    countingVFS.xGetLastError = vGetLastError;
    countingVFS.xCurrentTimeInt64 = vCurrentTimeInt64;
    countingVFS.xSetSystemCall = vSetSystemCall;
    countingVFS.xGetSystemCall = vGetSystemCall;
    countingVFS.xNextSystemCall = vNextSystemCall;
    return sqlite3_vfs_register(&countingVFS, makeDefault);
}

ArborSQLiteSyncCounts arbor_sqlite_sync_counter_read(void) {
    ArborSQLiteSyncCounts counts;
    counts.journal = atomic_load(&journalSyncs);
    counts.database = atomic_load(&databaseSyncs);
    counts.directory = atomic_load(&directorySyncs);
    counts.other = atomic_load(&otherSyncs);
    counts.directoryCounted = realOpenDirectory != NULL;
    return counts;
}

void arbor_sqlite_sync_counter_reset(void) {
    atomic_store(&journalSyncs, 0);
    atomic_store(&databaseSyncs, 0);
    atomic_store(&directorySyncs, 0);
    atomic_store(&otherSyncs, 0);
}
