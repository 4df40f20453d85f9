/*
 * helper_crashio.h: a crash-injection I/O layer for the WAL tests, after
 * SQLite's test6.c.
 *
 * Writes go through to the real files at once (so readers and recovery in
 * the same process see them), but every write and truncate since the last
 * fdatasync of that file is remembered with the bytes it replaced. At the
 * N-th sync (fdatasync, directory fsync or atomic meta replace) the layer
 * "loses power": it puts every file back to its last synced state, then
 * replays each unsynced operation in order, choosing at random to apply it,
 * skip it, apply only a prefix, or apply it with garbage bytes; renames and
 * unlinks not yet covered by a directory fsync are kept or undone at random.
 * From then on every mutating call fails with EIO, as if the process were
 * dead, and the test reopens the directory with the real POSIX layer.
 *
 * It also injects plain errors: writes failing with ENOSPC (optionally after
 * letting some bytes through), fdatasync failing with EIO, and a gate that
 * holds fdatasync calls so a test can pile up batches behind one.
 * Real fdatasync is never called: the tests simulate power loss, so there is
 * no need to pay for real durability.
 */
#ifndef HELPER_CRASHIO_H
#define HELPER_CRASHIO_H

#include <stdbool.h>
#include <stdint.h>

#include "wal/wal.h"

typedef struct crashio crashio_t;

crashio_t *crashio_new(unsigned seed);
void crashio_free(crashio_t *c);
const wal_io_t *crashio_io(crashio_t *c);

/* Crash at the n-th sync from now on (1 = the next one); 0: never. */
void crashio_crash_at_sync(crashio_t *c, int n);
bool crashio_crashed(crashio_t *c);
/* Syncs of any kind so far, and data fdatasyncs alone. */
int crashio_syncs(crashio_t *c);
int crashio_data_syncs(crashio_t *c);
/* Bytes written since the last fdatasync of their file (all files). */
uint64_t crashio_pending_bytes(crashio_t *c);

/* Every write fails with err (e.g. -ENOSPC) once `allow` more bytes have
 * been written, and so does mkdir; err 0 turns it off. */
void crashio_fail_writes(crashio_t *c, int err, uint64_t allow);
/* The next n data fdatasyncs fail with err. As Linux does ("fsyncgate"),
 * the file's unsynced writes are then lost for good: a later successful
 * fdatasync does not make them durable, only writing them again does, and
 * crashio_pending_bytes keeps counting them until then. */
void crashio_fail_syncs(crashio_t *c, int err, int n);

/* statvfs: the real file system's until crashio_space fakes one of
 * `total` bytes of which `other` are taken by other programs: free is then
 * total - other - the bytes of the files under the directory asked about
 * (their sizes; a file unlinked but not yet made durable does not count,
 * its blocks being free), never below 0. total 0: the real one again. */
void crashio_space(crashio_t *c, uint64_t total, uint64_t other);
/* statvfs fails with err from now on (-ENOSYS: "cannot tell"); 0: works. */
void crashio_statvfs_error(crashio_t *c, int err);
/* statvfs calls so far, and what the faked file system has free now. */
int crashio_statvfs_calls(crashio_t *c);
uint64_t crashio_space_free(crashio_t *c, const char *dir);

/* While closed, data fdatasyncs block. wait_blocked returns once one is
 * blocked at the gate (false after a 10 s deadline). */
void crashio_gate(crashio_t *c, bool closed);
bool crashio_wait_blocked(crashio_t *c);

#endif
