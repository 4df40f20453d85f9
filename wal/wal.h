/*
 * wal.h: the per-topic segmented write-ahead log, the one public header of wal/.
 *
 * Every accepted message is stored here before it is acknowledged to the
 * device, and read back from here by the replicator. The promises, each a
 * test in tests/unit/wal/ (docs/WAL.md has the long form and the figures):
 *   - nothing acknowledged is lost: a completion with rc 0 means the batch
 *     is in the log to the durability wal.fsync names (for a topic in the
 *     memory tier: that the checkpoint passed it, see MEMORY TIER);
 *   - order: per topic, offsets are contiguous in submission order, and
 *     completions for a topic arrive in submission order;
 *   - offsets never go backwards, across clean and unclean restarts, and an
 *     offset handed out beyond the log under a reservation is never given
 *     to another message (OFFSET RESERVATION);
 *   - the disk stays bounded (per topic and in total), a floor of free
 *     space is left to the rest of the system, and every message deleted
 *     before the cluster acknowledged it is counted, persistently;
 *   - a flash card is not worn out: one write(2) per batch, one fdatasync
 *     per group of batches, small record heads (wal_format.h).
 *
 * THREADS. Three kinds of caller, and one thread of our own:
 *   - the event loop (the MQTT gateway) builds batches, submits them and
 *     takes completions. wal/ does not depend on libuv: wal_open takes a
 *     notify(arg) callback that the writer thread calls when the list of
 *     completions goes from empty to non-empty (calls coalesce: drain the
 *     whole list with wal_take_done() each time; uv_async_send fits).
 *   - the writer thread, inside wal/, does every disk mutation: writes,
 *     fdatasync, segment rotation, retention, meta files, recovery repairs.
 *     A slow SD card therefore never stalls the loop.
 *   - readers (the replicator) read through their own file descriptors,
 *     concurrently with the writer, up to the readable end.
 *   - wal_checkpoint() and the wal_topic_* getters may be called from any
 *     thread.
 *
 * DURABILITY (wal.fsync) and THE READABLE END:
 *   ALWAYS    a completion is posted only after fdatasync covered the batch.
 *             Batches pending together share one fdatasync per file (group
 *             commit). Readable end = synced end.
 *   INTERVAL  completion after write(2); the writer fdatasyncs every
 *             fsync_interval_ms. Readable end = synced end.
 *   NEVER     completion after write(2); fdatasync only when a segment is
 *             sealed and at close. Readable end = written end.
 * The rule: readers never see what a power loss could take back (except in
 * NEVER mode, which says so). Otherwise a power loss could cut records the
 * replicator already sent, recovery would hand their offsets to new
 * messages, and the cluster, which skips offsets at or below the highest it
 * stored, would silently drop those new messages.
 * A SIGKILL loses nothing in any mode (the page cache outlives the process).
 *
 * FLASH WEAR. Linux counts a page in a process's write_bytes (and writes it
 * to the card) each time it goes from clean to dirty. fdatasync cleans the
 * partly filled last page of the segment, so the next batch dirties it
 * again: every sync costs about one extra 4 KiB page on top of the bytes
 * appended. Bytes written per message are therefore about
 *     record + 4096 / (records per fdatasync)
 * which group commit keeps low: at 2,000 msg/s of 144-byte records,
 * measured (bench/bench_wal.sh, docs/WAL.md): NEVER 1.01x the record size,
 * INTERVAL (1 s) 1.02x, ALWAYS with a batch every 100 ms 1.15x, every 50 ms
 * 1.29x, every 10 ms 2.43x. The ALWAYS cost is the price of a sync per
 * batch: batch bigger, or choose INTERVAL, to wear the card less. Each
 * fdatasync that grows the file also commits the file system journal (a few
 * blocks written by jbd2, not counted in the process's write_bytes).
 *
 * FAILURES. A write that fails (ENOSPC, EIO) is cut back and its batch
 * completes with the error; the topic enters WAL_TOPIC_FAILED, where new
 * batches fail fast (TB_EFULL for a full disk) until a retry (every
 * retry_ms, or wal_topic_retry) works: the disk must take a probe write as
 * large as the failed batch (up to 1 MiB; zeros past the log's end, cut off
 * at once), so the state does not flip to OK while the disk is still full. A failed fdatasync is never retried
 * as if nothing happened (Linux may have dropped the dirty pages and will
 * report success next time): the round's batches fail, the topic stops
 * acknowledging, and repair re-reads the segment from the last good sync,
 * rewrites what is intact, syncs, and counts what is not in lost_total
 * (writer.c says exactly what is safe in each mode).
 *
 * ERRORS follow base.h: 0 or a negative code (-errno, TB_E*); tb_strerror()
 * names them. A function that fails leaves its out-parameters NULL/zeroed.
 */
#ifndef WAL_WAL_H
#define WAL_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/base.h"

typedef struct wal wal_t;
typedef struct wal_topic wal_topic_t;
typedef struct wal_batch wal_batch_t;
typedef struct wal_reader wal_reader_t;

/* ---- I/O vtable ---------------------------------------------------------- */

/*
 * Every file operation of the WAL goes through this table, so tests can
 * install a crash-injection layer (tests/unit/wal/helper_crashio.c) that
 * holds unsynced writes, drops or garbles them at the N-th sync, and fails
 * writes with ENOSPC or EIO. Directory listing and file locking are not
 * routed (they mutate nothing). Entropy and the clock are here too, so the
 * golden-file test can make the writer's output deterministic.
 * Every function returns >= 0 on success (a fd, a byte count, 0) or -errno.
 * ctx is passed through untouched; functions may be called from the writer
 * and reader threads at once.
 */
typedef struct wal_io {
    void *ctx;
    int (*open)(void *ctx, const char *path, int flags, mode_t mode);
    int (*close)(void *ctx, int fd);
    ssize_t (*pread)(void *ctx, int fd, void *buf, size_t n, off_t off);
    ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t n, off_t off);
    int (*fdatasync)(void *ctx, int fd);
    int (*ftruncate)(void *ctx, int fd, off_t len);
    int (*fsize)(void *ctx, int fd, uint64_t *size /* OUT */);
    int (*rename)(void *ctx, const char *from, const char *to);
    int (*unlink)(void *ctx, const char *path);
    int (*mkdir)(void *ctx, const char *path, mode_t mode);
    int (*fsync_dir)(void *ctx, const char *path);
    /* write temp, fsync, rename, fsync dir (default: tb_write_file_atomic) */
    int (*write_atomic)(void *ctx, const char *path, const void *data, size_t len);
    int (*random)(void *ctx, void *buf, size_t n); /* default: getrandom */
    uint64_t (*now_ms)(void *ctx);                 /* default: tb_wall_ms */
    /* The file system holding path: *avail, the bytes an unprivileged
     * process may still write there (statvfs f_bavail x f_frsize), and
     * *total, its size (f_blocks x f_frsize). Default: statvfs(3). NULL, or
     * an error: the free space is unknown and the floor (min_free_bytes) is
     * off until a later call works. */
    int (*statvfs)(void *ctx, const char *path, uint64_t *avail /* OUT */, uint64_t *total /* OUT */);
    int (*rmdir)(void *ctx, const char *path);     /* an empty directory (a retired topic's) */
} wal_io_t;

/* The POSIX table (ctx unused). */
const wal_io_t *wal_io_posix(void);

/* ---- options ------------------------------------------------------------- */

typedef enum { WAL_FSYNC_ALWAYS = 0, WAL_FSYNC_INTERVAL = 1, WAL_FSYNC_NEVER = 2 } wal_fsync_t;

/* Parses "always" | "interval" | "never"; returns 0 or TB_ECONFIG. */
int wal_fsync_parse(const char *s, wal_fsync_t *out /* OUT */);
const char *wal_fsync_name(wal_fsync_t m);

/*
 * OVERFLOW: what a topic does when a write would take it past its bound
 * (max_topic_bytes, or its own bound: wal_topic_set_own_bound), the WAL
 * past max_total_bytes, or the free space of the file system below the
 * floor (min_free_bytes: see wal_space; topics with an own bound are
 * exempt). The policy of the topic being written decides (wal/overflow.c
 * holds every case):
 *   DROP_OLDEST  delete the topic's oldest sealed segments (for the total
 *                bound and the floor, the oldest sealed segment across all
 *                topics inside the total; never one of a topic with an own
 *                bound), even if not replicated, counting every
 *                unacknowledged message deleted in dropped_total; at the
 *                floor, checkpoints not applied yet are applied first, so
 *                acknowledged segments go before anything else. When only
 *                active segments are left and the bound still refuses, the
 *                batch completes with TB_EFULL and the topic stays OK.
 *   REFUSE       delete nothing that is not acknowledged: apply the topic's
 *                checkpoint if it moved (the segments wholly at or below it
 *                go, as they would at the next checkpoint flush), and, for
 *                the total bound and the floor, every topic's that moved;
 *                if the bound still has no room, the batch completes with
 *                TB_EFULL and the topic stays OK (a warning at most once a
 *                minute names the bound). Space comes back only as
 *                checkpoints move (or, at the floor, as space returns). For
 *                a log that must not lose a record to a bound, such as the
 *                broker's session journal: see wal_topic_set_own_bound.
 *   DROP_NEWEST  the same for a data topic, by its configuration name
 *                (mqtt.topic_mappings[].on_full): what is stored stays
 *                until the cluster acknowledges it, and new batches are
 *                refused while the bound is full.
 *   BLOCK        DROP_NEWEST's room-making (delete nothing unacknowledged),
 *                but a batch that finds no room is not refused: the writer
 *                HOLDS it, unwritten and without offsets, in the topic's
 *                FIFO of held batches, and every later batch of the topic
 *                queues behind it (order kept). Each time the writer wakes
 *                (a moved checkpoint wakes it; the free-space reading is
 *                periodic) it tries the held batches again, oldest first,
 *                and writes and completes those that now fit. While any is
 *                held, wal_topic_blocked() says so: the broker stops reading
 *                the topic's publishers until it is false again. Held
 *                batches complete with TB_ECLOSED at wal_close, and fail
 *                fast like any other batch if the topic fails. If the policy
 *                is changed away from BLOCK, the held batches are tried
 *                under the new policy at the next wake.
 * A refused batch's completion has refused_at_bound set, so a caller tells
 * a bound (the topic OK, nothing tried on disk) from a failed disk, which
 * TB_EFULL alone does not (a failed topic answers TB_EFULL too).
 * Members are numbered from 0, DROP_OLDEST first, so zeroed options mean it.
 */
typedef enum {
    WAL_OVERFLOW_DROP_OLDEST = 0,
    WAL_OVERFLOW_REFUSE = 1,
    WAL_OVERFLOW_DROP_NEWEST = 2,
    WAL_OVERFLOW_BLOCK = 3,
    WAL_OVERFLOW__COUNT
} wal_overflow_t;

/* Parses "drop_oldest" | "refuse" | "drop_newest" | "block"; returns 0, or TB_ECONFIG (*out untouched). */
int wal_overflow_parse(const char *s, wal_overflow_t *out /* OUT */);
/* The policy's name as wal_overflow_parse reads it; "?" out of range. */
const char *wal_overflow_name(wal_overflow_t p);

#define WAL_RESERVE_SPAN_DEFAULT (1ull << 24)

/*
 * FOR TESTS ONLY: the steps of the memory tier (MEMORY TIER, THE SPILL) at
 * which wal_opts_t.step_hook is called, so a test can kill the process (or
 * look) at each one deterministically (tests/unit/wal/test_memory_kill.c).
 * The docs/design/MEMORY-FIRST.md section 2.9 rows each step stands for:
 *   HELD          wal_submit (caller's thread): a batch was held (K1/K2)
 *   SPILL_QUEUED  MEMORY -> SPILLING, the spill item queued (under the tier's
 *                 lock: the writer cannot take the snapshot yet) (K3)
 *   SEGMENT       writer: a new segment started at a hole (header synced,
 *                 renamed), no record written in it yet: the spill's, or
 *                 that of the first log batch after an empty spill (K4)
 *   WRITTEN       writer: every record of the spill written, not synced (K5)
 *   SYNCED        writer: the spill's fdatasync returned 0 (K6)
 *   POSTED        writer: the spill's completions posted, the topic DRAINING (K7)
 *   T2_WRITTEN    writer: the switch's checkpoint and reservation written (K8)
 *   READY         writer: DRAINING -> READY done (under the tier's lock: no
 *                 submit takes the counter back before the hook returns)
 *   MEMORY        wal_submit: READY -> MEMORY done (under the tier's lock),
 *                 the batch that took the counter back not held yet (K0)
 *   PARKED        writer: on_full block, the spill found no room and waits
 *                 (what it wrote so far unsynced; docs/WAL.md "The memory tier")
 */
typedef enum {
    WAL_STEP_HELD = 1,
    WAL_STEP_SPILL_QUEUED,
    WAL_STEP_SEGMENT,
    WAL_STEP_WRITTEN,
    WAL_STEP_SYNCED,
    WAL_STEP_POSTED,
    WAL_STEP_T2_WRITTEN,
    WAL_STEP_READY,
    WAL_STEP_MEMORY,
    WAL_STEP_PARKED,
    WAL_STEP__END
} wal_step_t;

typedef struct wal_opts {
    const char *dir;              /* wal.dir: root directory (created if missing) */
    uint64_t segment_bytes;       /* wal.segment_bytes: 16 MiB. A segment is sealed
                                     before a record would take it past this; also the
                                     largest batch wal_batch_add accepts */
    uint64_t max_topic_bytes;     /* wal.max_topic_bytes: 1 GiB; >= 2 * segment_bytes */
    uint64_t max_total_bytes;     /* wal.max_total_bytes: 4 GiB; >= 2 * segment_bytes. Topics
                                     with an own bound (wal_topic_set_own_bound) are not in it */
    wal_fsync_t fsync;            /* wal.fsync: ALWAYS */
    wal_overflow_t overflow;      /* DROP_OLDEST: every topic's policy at a bound until
                                     wal_topic_set_overflow sets its own (not persisted:
                                     each open starts every topic with this). Not in the
                                     config file yet */
    uint32_t fsync_interval_ms;   /* wal.fsync_interval_ms: 1000 (INTERVAL only) */
    uint64_t min_free_bytes;      /* wal.min_free_bytes given as bytes: 0 */
    uint32_t min_free_permille;   /* wal.min_free_bytes given as N%, in tenths of a percent: 20
                                     (2%, the default), at most 500. The FREE-SPACE FLOOR is the
                                     larger of the two, of the file system holding dir (see
                                     wal_space); 0 and 0 turn it off */
    uint32_t space_check_ms;      /* 1000: how often the writer reads the free space (statvfs);
                                     also after it deletes segments, after a write fails for want
                                     of space, and at wal_sync. Not in the config file */
    uint32_t retry_ms;            /* 1000: how often a failed topic retries */
    uint32_t checkpoint_flush_ms; /* 5000: checkpoints reach disk at most this often
                                     (and at close). Each write costs a fresh 4 KiB page
                                     and a few journal commits; losing the last few
                                     seconds of checkpoint in a crash only re-sends
                                     batches the cluster already stored and skips */
    bool verify_on_open;          /* false: check every CRC of sealed segments at open
                                     (slow on big logs); otherwise sealed segments are
                                     verified by readers as they go, and by wal_check */
    uint64_t reserve_span;        /* WAL_RESERVE_SPAN_DEFAULT (2^24): offsets one reservation
                                     write covers (OFFSET RESERVATION); 2 .. 2^40. Not in the
                                     config file */
    uint32_t pad_align;           /* 0: ALWAYS mode ends a synced write on a page boundary
                                     when worth it (wal/pad.c), pages being the page size or
                                     wal.dir's st_blksize, whichever is larger (<= 64 KiB).
                                     A power of two up to 64 KiB sets the boundary; 1 turns
                                     padding off. Not in the config file: for tests and
                                     benchmarks */
    void (*notify)(void *arg);    /* writer thread: completions are waiting */
    void *notify_arg;
    const wal_io_t *io;           /* NULL: wal_io_posix() */
    /* FOR TESTS ONLY; NULL in production (wal_opts_default). Called at each
     * wal_step_t, on the thread doing the step, possibly under the topic's
     * memory lock: it must not call the WAL back (it may raise(SIGKILL)). */
    void (*step_hook)(void *arg, wal_topic_t *t, wal_step_t step);
    void *step_arg;
} wal_opts_t;

/* Fills the documented defaults (dir NULL, notify NULL). Those of options
 * that are configuration keys must equal config_table.c's; wal/ does not
 * read config/, so tests/unit/replicator/test_wal_defaults.c checks. */
void wal_opts_default(wal_opts_t *o /* OUT */);

/*
 * Opens (creating if needed) the WAL under opts->dir, recovers every topic
 * directory found there (so the total bound covers all of them, until
 * wal_topic_set_own_bound takes one out), and starts
 * the writer thread. Takes an exclusive flock on <dir>/LOCK: a second
 * process gets -EWOULDBLOCK. Returns 0 and *out, or TB_ECONFIG for bad
 * options, or -errno. Recovery never refuses to start because of corrupt
 * data: it cuts torn tails and quarantines corrupt sealed segments (logged,
 * counted in wal_topic_stats).
 */
int wal_open(const wal_opts_t *opts, wal_t **out /* OUT */);

/*
 * Drains pending batches (their completions are posted), makes one last
 * repair attempt on FAILED topics, fdatasyncs every active segment in every
 * mode, persists checkpoints and counters, joins the writer thread and
 * frees everything, including completions nobody took. Readers must be
 * closed first. Returns 0, or the first error met while syncing or
 * persisting, or a still-FAILED topic's error (the log is consistent on
 * disk either way: recovery at the next open repairs it).
 * Completions still on the done list are freed without looking at their
 * user pointers; to answer them (SIGTERM drain), call wal_sync() and
 * wal_take_done() first, then wal_close().
 */
int wal_close(wal_t *w);

/*
 * Barrier: returns once the writer has processed everything submitted
 * before the call, fdatasynced every topic and persisted checkpoints.
 * Completions of those batches are posted before it returns. Any thread but
 * the writer. Returns 0, the first sync/persist error, or the error of a
 * topic still FAILED (whose data is then not known to be synced).
 */
int wal_sync(wal_t *w);

/* ---- topics --------------------------------------------------------------- */

/*
 * Returns the topic's handle, creating its directory and first segment (on
 * the writer thread; this call waits) if it does not exist. Names are any
 * bytes but NUL, 1..200 of them (upstream topics look like /edge1/telemetry).
 * The handle lives until wal_close. Returns 0, TB_EINVALID for a bad name,
 * TB_ECLOSED, or -errno.
 */
int wal_topic_open(wal_t *w, const char *name, wal_topic_t **out /* OUT */);
/* The topic handle if the WAL has that topic, else NULL. */
wal_topic_t *wal_topic_find(wal_t *w, const char *name);
/* Topics in name order: calls fn for each; stops when fn returns non-zero. */
void wal_topic_foreach(wal_t *w, int (*fn)(wal_topic_t *t, void *arg), void *arg);
const char *wal_topic_name(const wal_topic_t *t);

typedef enum {
    WAL_TOPIC_OK = 0,
    WAL_TOPIC_FAILED = 1, /* a write or fdatasync failed: batches fail fast with
                             TB_EFULL (disk full) or the errno until a retry works */
} wal_topic_state_t;

wal_topic_state_t wal_topic_state(const wal_topic_t *t);
/* The error that put the topic in FAILED (0 when OK). */
int wal_topic_error(const wal_topic_t *t);
/* Asks the writer to retry a failed topic now rather than at the next retry_ms tick. */
void wal_topic_retry(wal_topic_t *t);

/*
 * Sets t's overflow policy (see OVERFLOW), in place of opts->overflow, until
 * wal_close; it is not persisted, so set it again after each wal_open. Any
 * thread, at any time (one atomic store): the writer reads it once per
 * batch, when it takes the batch up, so a batch already being written keeps
 * the policy it started with; set it before the topic's first wal_submit to
 * cover every batch. Returns 0, or TB_EINVALID for a value out of range
 * (the policy is then unchanged).
 */
int wal_topic_set_overflow(wal_topic_t *t, wal_overflow_t p);
/* t's overflow policy (any thread). */
wal_overflow_t wal_topic_overflow(const wal_topic_t *t);
/* True while the writer holds batches of t for room (BLOCK, see OVERFLOW).
 * It turns false before the completions of the last held batches are
 * posted, so a caller that saw true sees a completion of t after it turned
 * false (any thread). */
bool wal_topic_blocked(const wal_topic_t *t);
/* Gives up waiting for room, for good: the batches t holds complete with
 * TB_ECLOSED (never written, refused_at_bound false), in order, at the
 * writer's next wake, through wal_take_done as usual, and so does every
 * later batch that would be held. For a shutdown that must not wait for
 * the cluster (any thread). */
void wal_topic_release_held(wal_topic_t *t);

/*
 * OWN BOUND. Gives t a disk bound of its own, max_bytes, outside
 * max_total_bytes: for a log that a data bound must never cut into, the
 * broker's session journal ("$sessions", whose checkpoint only the broker's
 * compaction moves). From when it returns until wal_close:
 *   - t's bytes do not count toward max_total_bytes (they are taken out of
 *     the total now) and max_bytes, not max_topic_bytes, bounds t: the disk
 *     holds up to max_total_bytes plus the own bounds;
 *   - no other topic's write deletes t's segments: the total bound never
 *     picks t's oldest segment;
 *   - t's overflow policy is REFUSE: once max_bytes is full of records
 *     above its checkpoint, its batches complete with TB_EFULL (the topic
 *     stays OK) and nothing is deleted; wal_checkpoint past t's oldest
 *     segments is what frees space. (wal_topic_set_overflow may still
 *     change the policy; drop_oldest would then delete t's own oldest
 *     segments at max_bytes, never for the total.)
 * It is NOT persisted: wal_open recovers t like any topic and counts it in
 * the total, so call this again after each wal_open, before any batch is
 * submitted to any topic (until then t is an ordinary topic, and a bound
 * reached by another topic's write may delete its oldest segment). Call it
 * before t's first wal_submit; batches submitted before it are handled under
 * the old bound. Calling it again only changes max_bytes. If t already holds
 * more than max_bytes, its batches are refused until its checkpoint frees
 * enough. Any thread but the writer; blocks until the writer thread applied
 * it. Returns 0, TB_EINVALID for max_bytes < 2 * segment_bytes (or a t that
 * is not w's; nothing changes), or TB_ECLOSED once wal_close started.
 */
int wal_topic_set_own_bound(wal_t *w, wal_topic_t *t, uint64_t max_bytes);

/*
 * OFFSET RESERVATION: for offsets handed to readers before their records are
 * in the log (memory-first durability, issue 16: a message held in memory
 * while the cluster confirms it): the memory tier below uses it.
 *
 * The rule: an offset that is not in the log may be handed out (to a reader,
 * so to the cluster) only below wal_topic_reserved(t), the topic's durable
 * reservation. The writer persists it in the topic's meta file (version 2,
 * field reserved: atomic replace, synced) before wal_topic_reserved reports
 * it, and recovery continues offsets at or above it. So after a SIGKILL or a
 * power loss, even with none of those offsets on disk, the next offset is
 * above every offset ever handed out: the cluster, which skips batches at or
 * below the highest offset it stored, never drops a new message for an
 * offset reused.
 *
 * Cost: one meta write (80 bytes; one atomic replace, 4 KiB of write_bytes
 * on ext4: docs/WAL.md) per reserve_span offsets handed out. The caller
 * declares what it is about to hand out with wal_topic_reserve(t, end);
 * when the reservation is less than reserve_span / 2 ahead of end (or
 * behind it), the writer raises it by reserve_span in one meta write, off
 * the caller's path. The reservation stays 1/2 to 3/2 span ahead, so a kill
 * skips at most 1.5 x reserve_span offsets (harmless: the cluster needs
 * order, not contiguity).
 *
 * A clean close (wal_close) lowers the reservation to min(the highest end
 * declared, reserved), and clears it when that is at or below the log's
 * end, so a clean restart continues where the log ends (or just past the
 * offsets handed out and never written) instead of jumping a span. The
 * meta file is then version 1 again unless dropped_age is set.
 *
 * Offsets handed out beyond the log are the caller's: the log's own next
 * offset does not move for them, so the caller must not submit batches to t
 * while it holds such offsets (the memory tier will hand its counter back
 * to the writer when it spills). After a kill, recovery starts a new segment
 * at the reservation; the offsets between the log's end and it have no
 * record. When nothing on disk is above the checkpoint, the checkpoint moves
 * over them at once (in memory; persisted with the next checkpoint write),
 * so readers start past them; behind a backlog they are a hole that a
 * reader reports as WAL_GAP and wal_topic_stats as hole_from/hole_to.
 */
enum { WAL_RESERVE_PENDING = 1 }; /* wal_topic_reserve: not covered yet */

/*
 * Declares that offsets below end are about to be handed out beyond the
 * log, and asks the writer to raise the reservation when it is due. Any
 * thread; never blocks (an atomic max and one load; the writer is woken at
 * most once per raise). Returns 0 when every offset below end is covered
 * (they may be handed out), WAL_RESERVE_PENDING when not yet (hand out
 * none of those not covered; call again, or wal_topic_reserve_wait), or
 * TB_EINVALID for end > 2^62.
 */
int wal_topic_reserve(wal_topic_t *t, uint64_t end);
/*
 * The same, then waits until the reservation covers end, raising it now
 * (one meta write) if it is due, even while the writer backs off after a
 * failed write. Any thread but the writer. Returns 0, the meta write's
 * error (the reservation is unchanged; the writer tries again every
 * retry_ms), TB_EINVALID, or TB_ECLOSED once wal_close started.
 */
int wal_topic_reserve_wait(wal_topic_t *t, uint64_t end);
/* The durable reservation: offsets below it may be handed out beyond the
 * log (0: none). One atomic load, any thread. */
uint64_t wal_topic_reserved(const wal_topic_t *t);

/*
 * MEMORY TIER (memory-first durability, issue 16; docs/WAL.md "The memory
 * tier"). The gateway sets it for topics whose mappings say durability:
 * memory_first (gateway/broker/server.c).
 *
 * In MEMORY mode a topic's submitted batches are not written: wal_submit
 * gives their records offsets at once (on the caller's thread, from the
 * same sequence as the log's: they continue where the log ends) and holds
 * the batches, in offset order, in memory. Readers (the replicator) read
 * them from memory through the usual wal_reader_next, in offset order,
 * past the end of the log: the readable end covers them when wal_submit
 * returns. The checkpoint is what releases them (the cluster acknowledged
 * them): each held batch whose last offset the checkpoint passes is
 * released, in order, and with ack UPSTREAM its completion (rc 0) is posted
 * only then, through wal_take_done as usual; so a completion means "in the
 * cluster" instead of "in the log". With ack RECEIVED the completion is
 * posted at once (the batch is held until the checkpoint passes it all the
 * same; the loop may free it meanwhile): a kill then loses what was held
 * and completed, which is that mode's stated price.
 *
 * Offsets: a held record's offset is always below the durable reservation
 * (OFFSET RESERVATION; wal_topic_reserved): wal_submit declares each batch
 * before it hands its offsets out; the writer raises the reservation half a
 * span ahead, off the caller's path; if it is not covered yet (the writer
 * is far behind, or its meta write fails), wal_submit waits for the raise.
 * So after a kill the next offsets are above every offset ever readable.
 *
 * Disk: nothing is written for a held batch, and the checkpoint is not
 * persisted while no record on disk lies above the persisted one (it would
 * tell recovery nothing: after a kill recovery moves the checkpoint over
 * the offsets that have no record). In steady state the disk is not
 * written at all, apart from one reservation write per reserve_span
 * offsets.
 *
 * THE SPILL (wal_topic_spill) writes what is held to the log when the
 * cluster does not acknowledge within spill_after_ms, when a batch would
 * take the held bytes past memory_bytes, when the caller says its output is
 * down, and at wal_close; the topic is then in the log (DRAINING) until
 * the log is acknowledged, and returns to MEMORY (see wal_mode_t). A batch
 * whose reservation cannot be
 * written completes with that error. wal_sync does not wait for held
 * batches (a spill queued before it is processed before it).
 */
typedef enum { WAL_DURABILITY_LOG = 0, WAL_DURABILITY_MEMORY_FIRST = 1 } wal_durability_t;
typedef enum { WAL_ACK_UPSTREAM = 0, WAL_ACK_RECEIVED = 1 } wal_ack_t;
typedef struct wal_memory_opts {
    wal_durability_t durability;  /* LOG */
    wal_ack_t ack;                /* UPSTREAM: complete a held batch when the checkpoint passes it */
    uint64_t memory_bytes;        /* 8 MiB: the most a topic holds (batch bytes) */
    uint32_t spill_after_ms;      /* 250: the oldest held batch waits at most this for the
                                     checkpoint, then the topic spills (THE SPILL) */
} wal_memory_opts_t;
/* LOG: never in memory. MEMORY: holding. SPILLING: a spill is queued: the
 * held records are being written, and new batches go to the log behind
 * them. DRAINING: in the log after a spill, until the cluster acknowledged
 * everything the log holds, no batch of the topic is at the writer, and the
 * hold-down passed; then the writer persists the checkpoint and the
 * reservation (one meta write) and the topic is READY: the next wal_submit
 * that finds no batch of it at the writer takes the offset counter back
 * and the topic is in MEMORY again. The hold-down is 0 at first and after
 * 60 s in MEMORY without a spill; each spill within 60 s of a return to
 * MEMORY doubles it (1 s, 2 s, ... 60 s), so a flapping cluster makes the
 * topic stay in the log longer instead of switching every few hundred ms.
 * A SHUTDOWN spill is for good: the topic stays DRAINING until wal_close. */
typedef enum { WAL_MODE_LOG = 0, WAL_MODE_MEMORY = 1, WAL_MODE_SPILLING = 2, WAL_MODE_DRAINING = 3,
               WAL_MODE_READY = 4 } wal_mode_t;
/* Why a topic spilled: the oldest held batch waited spill_after_ms for the
 * checkpoint; a batch would pass memory_bytes; the caller said its output
 * is down; the caller is stopping (wal_close spills too). */
typedef enum { WAL_SPILL_TIMEOUT, WAL_SPILL_BYTES, WAL_SPILL_OUTPUT, WAL_SPILL_SHUTDOWN, WAL_SPILL__COUNT } wal_spill_t;
/* The reason's name: "timeout", "bytes", "output", "shutdown" ("?" out of range). */
const char *wal_spill_name(wal_spill_t why);

/* Fills the defaults above. */
void wal_memory_opts_default(wal_memory_opts_t *o /* OUT */);
/*
 * Sets t's durability (not persisted: each wal_open starts every topic in
 * LOG). MEMORY_FIRST on a LOG topic: the writer first processes what was
 * submitted before (the caller must not submit to t concurrently), syncs
 * t, makes sure the reservation covers the log's end, and then t is in
 * MEMORY: batches submitted after this returns are held. On a MEMORY topic
 * it only changes ack and memory_bytes (for batches submitted later). Any
 * thread but the writer; blocks for the writer. Returns 0, TB_EINVALID for
 * options out of range, TB_ENOTREADY while t is FAILED or holds batches
 * for room (on_full block), the reservation's write error, TB_ECLOSED, or
 * TB_EUNSUPPORTED for LOG on a memory topic, and for any change while it
 * is SPILLING, DRAINING or READY (not built: a memory topic stays one
 * until wal_close).
 */
int wal_topic_set_durability(wal_topic_t *t, const wal_memory_opts_t *o);
/* t's mode (any thread, one atomic load). */
wal_mode_t wal_topic_mode(const wal_topic_t *t);
/* Records held in memory and not yet acknowledged (any thread; a lock). */
uint64_t wal_topic_held(wal_topic_t *t);
/*
 * THE SPILL: writes every held batch that the checkpoint has not passed to
 * the log, in offset order, and syncs it (in every fsync mode: a spill is
 * what keeps a promise made from memory); then completes (rc 0) those not
 * completed yet, releases them all, and t is DRAINING: in the log, its
 * offsets continuing where memory's ended. The offsets acknowledged from
 * memory before the first one written are a hole, always a segment
 * boundary: the spill starts a new segment there. From the call on, new
 * batches go to the writer behind the spill, and t returns to MEMORY as
 * wal_mode_t says. Triggered by the writer when
 * the oldest held batch waited spill_after_ms, by wal_submit when a batch
 * would pass memory_bytes, by wal_close (what is held is written, not lost),
 * or by this call (any thread; a no-op unless t is in MEMORY). If the write
 * fails, the batches not yet completed complete with its error and t is
 * FAILED, as for any failed write; their offsets are not reused.
 */
void wal_topic_spill(wal_topic_t *t, wal_spill_t why);

/*
 * The readable end: records with offset < this value may be read (see
 * DURABILITY above). One atomic load; poll it, or retry a reader that
 * returned WAL_END when it moves.
 */
uint64_t wal_topic_readable_end(const wal_topic_t *t);

/*
 * How many records are stored with offsets in (after, end): in the log's
 * segments or held in the memory tier. Offsets that hold no record are not
 * counted: a reservation skipped after a kill (one per restart, up to a
 * reserve span each, OFFSET RESERVATION), a hole where the memory tier's
 * acknowledged records were never written, segments deleted by a bound or
 * quarantined. With after = the checkpoint and end = the readable end it is
 * the backlog still to replicate (rep_topic_stats.lag_messages). Each
 * segment's records are [base, end) (contiguous, wal_format.h THE RULE);
 * the sealed ones' ends come from the writer at rotation and from recovery
 * (a look at each sealed segment's last 4 KiB at open). O(segments) under
 * the topic's lock; any thread.
 */
uint64_t wal_topic_stored_between(wal_topic_t *t, uint64_t after, uint64_t end);

/*
 * Records that the cluster acknowledged everything up to and including
 * acked_offset (any thread). The writer persists it (atomic replace of the
 * topic's meta file, at most every checkpoint_flush_ms, and at close) and
 * deletes sealed segments whose records are all at or below it; batches
 * held in the memory tier that it passes are released and completed (MEMORY
 * TIER). A value lower than the current checkpoint is ignored. Returns 0, or TB_EINVALID if
 * acked_offset is at or past the readable end.
 */
int wal_checkpoint(wal_topic_t *t, uint64_t acked_offset);
/*
 * As wal_checkpoint, and tells, decided under one lock with the move, below
 * which offset a disk bound has deleted records since the log was opened
 * (*drop_floor; 0 when it deleted nothing unacknowledged). A record being
 * acknowledged now whose offset is below it was counted in dropped_total
 * when it was deleted (its batch was in flight then): the caller must not
 * count it as replicated as well. So every offset ends up either dropped or
 * acknowledged while stored, never both, and the accounting invariant
 * (docs/OPERATIONS.md) can be exact. drop_floor may be NULL.
 */
int wal_checkpoint_floor(wal_topic_t *t, uint64_t acked_offset, uint64_t *drop_floor /* OUT */);
/*
 * As wal_checkpoint_floor, and adds `aged` to dropped_age_total: records
 * at or below acked_offset that the caller skipped unsent for their age
 * (max_age). The count moves with the checkpoint, under the same lock, and
 * is persisted in the same meta write as the checkpoint that passes those
 * records (meta version 2): a kill before that write loses both, so the
 * records are read again and counted again once; never twice, never lost.
 * aged is ignored when acked_offset does not move the checkpoint (those
 * offsets were passed, and counted, already).
 */
int wal_checkpoint_ex(wal_topic_t *t, uint64_t acked_offset, uint64_t aged, uint64_t *drop_floor /* OUT */);
/* The checkpoint (0: nothing acknowledged yet). After a restart: what was
 * persisted. Replication resumes at wal_topic_checkpoint(t) + 1. */
uint64_t wal_topic_checkpoint(const wal_topic_t *t);

/*
 * CURSORS: several outputs read one topic's log, each with its own
 * persistent checkpoint, a *slot* of the topic (at most WAL_MAX_CURSORS,
 * 32, per topic). An output is known by a small persistent id
 * (wal_output_id; "danube" is 0 in every log). The topic's checkpoint
 * (wal_topic_checkpoint, what retention and the memory tier go by) is the
 * minimum over its ACTIVE slots: a sealed segment is deleted only when
 * every active slot is past it, or by a bound; each slot counts its own
 * drops (records deleted before that output acknowledged them), persisted
 * with the checkpoints in the topic's one meta file (version 3; versions 1
 * and 2 are still written while the topic has only the default slot, id 0).
 * A PARKED slot (wal_cursor_close, or not opened by wal_cursors_settled)
 * keeps its checkpoint and its drop count but is not waited for.
 *
 * wal_checkpoint, wal_checkpoint_floor and wal_checkpoint_ex act on slot 0:
 * a log whose only reader uses them behaves and is stored as before.
 * Records are read with a wal_reader opened at wal_cursor_checkpoint + 1.
 */
typedef struct wal_cursor wal_cursor_t;
typedef enum { WAL_START_LATEST, WAL_START_EARLIEST } wal_start_t;
typedef struct wal_cursor_opts {
    wal_start_t start;   /* for a slot that never existed */
    bool protects;       /* informational for now (persisted in the slot's flags) */
} wal_cursor_opts_t;
typedef struct wal_cursor_stats {
    uint64_t checkpoint;
    uint64_t dropped_total;      /* deleted before this output acknowledged them; persistent */
    uint64_t dropped_since_open; /* of those, at or above the topic's open_offset */
    uint64_t drop_floor;         /* offsets below it were deleted above its checkpoint (0: none) */
    uint64_t dropped_age_total;  /* what wal_cursor_ack_ex counted; persistent */
    bool protects, active;
} wal_cursor_stats_t;

/* The persistent id of output `name` ([A-Za-z0-9_-]{1,64}) in <wal.dir>/OUTPUTS,
 * added (atomic replace) when new. Any thread; blocks on the write. Returns 0,
 * TB_EINVALID for a bad name, TB_EFULL past 1,023 outputs besides danube, or the write's -errno. */
int wal_output_id(wal_t *w, const char *name, uint16_t *id /* OUT */);
/* Opens (or reactivates) output id's slot on t: its persisted checkpoint; for
 * a slot that never existed, readable_end - 1 (LATEST) or the oldest offset on
 * disk - 1 (EARLIEST). From now on retention waits for it (the topic's
 * checkpoint may go down). Any thread. Returns 0, TB_EFULL when t has
 * WAL_MAX_CURSORS slots, or TB_EINVALID when the slot has an open cursor. */
int wal_cursor_open(wal_topic_t *t, uint16_t id, const wal_cursor_opts_t *o, wal_cursor_t **out /* OUT */);
/* After the boot's cursors are open: slots nobody opened (wal_cursor_open,
 * or for id 0 wal_checkpoint*) are PARKED and each topic's checkpoint is
 * recomputed. Until then it is the minimum over every persisted slot. */
void wal_cursors_settled(wal_t *w);
uint64_t wal_cursor_checkpoint(const wal_cursor_t *c);
/* wal_checkpoint_floor for one slot: moves it (lower values ignored; 0 or
 * TB_EINVALID at or past the readable end), and when the minimum moved,
 * releases the memory tier's batches it passed and wakes the writer.
 * *drop_floor is the slot's. */
int wal_cursor_ack(wal_cursor_t *c, uint64_t acked, uint64_t *drop_floor /* OUT, may be NULL */);
/* As wal_cursor_ack, adding aged to the slot's dropped_age (wal_checkpoint_ex). */
int wal_cursor_ack_ex(wal_cursor_t *c, uint64_t acked, uint64_t aged, uint64_t *drop_floor /* OUT, may be NULL */);
void wal_cursor_stats(wal_cursor_t *c, wal_cursor_stats_t *out /* OUT */);
/* Parks the slot (kept, not waited for) and frees c. Every cursor is closed
 * before wal_close (like a wal_reader: it points into the topic). */
void wal_cursor_close(wal_cursor_t *c);
/* Offline (refuses with -EWOULDBLOCK while <dir>/LOCK is held): removes output
 * `name` from <dir>/OUTPUTS and its slot from every topic's meta file, printing
 * what went to report (may be NULL). "danube" cannot be forgotten (TB_EINVALID);
 * an unknown name is -ENOENT. */
int wal_forget_output(const char *dir, const char *name, FILE *report);

/*
 * OUTPUT STATE: a small durable blob per (output, key), for state an output
 * keeps of its own beside the log (Sparkplug's bdSeq and alias table), in
 * <wal.dir>/$outputs/<id>/<key> (wal_format.h OUTPUT STATE BLOBS: magic,
 * version, length, CRC32C). wal_forget_output removes an output's blobs.
 */
#define WAL_STATE_MAX (1u << 20)  /* the largest blob */
/* Replaces the blob key ([A-Za-z0-9_-]{1,64}) of output id (one wal_output_id
 * gave) with the n bytes at p, on the writer thread, in FIFO order with the
 * batches (atomic replace through the io vtable: after a crash the old blob
 * or the new one, whole). Blocks until it is durable. Any thread but the
 * writer. Returns 0, TB_EINVALID (a bad key, an id OUTPUTS does not name,
 * n > WAL_STATE_MAX), TB_ECLOSED, or the write's -errno (the old blob, if
 * any, is then still there). */
int wal_output_state_put(wal_t *w, uint16_t id, const char *key, const void *p, size_t n);
/* Reads blob key of output id: 0 with *p (malloc'd, the caller frees; NULL
 * when n is 0) and *n; -ENOENT when there is none (never put, or forgotten);
 * TB_ECORRUPT when the file is damaged (checksum, length: logged with the
 * file; a caller starts over as if it were missing, knowing it was not);
 * TB_EUNSUPPORTED for a newer version; TB_EINVALID for a bad key or id; or
 * -errno. Any thread. On failure *p is NULL and *n 0. */
int wal_output_state_get(wal_t *w, uint16_t id, const char *key, void **p /* OUT */, size_t *n /* OUT */);

/*
 * RETIRING A TOPIC (docs/design/RELOAD.md 4; the RETIRED file's format is in
 * wal_format.h). A topic nothing routes to any more is removed from the log
 * once drained, leaving a tombstone in <wal.dir>/RETIRED: its next offset
 * and its counters, so a topic re-created under the same name continues
 * above every offset the cluster may hold, with its counters.
 *   - Drained: the topic's checkpoint (the minimum over its active cursor
 *     slots; after an open, over every persisted slot until
 *     wal_cursors_settled) has passed its last offset, the memory tier
 *     holds nothing (wal_topic_held == 0) and no batch is held for room.
 *   - wal_topic_retire queues the removal to the writer (after every batch
 *     submitted before it): the entry is written (atomic replace), then the
 *     directory removed (segments, meta, rmdir, the log's directory
 *     fsync()ed). The handle stays valid memory until wal_close, but is no
 *     longer found (wal_topic_find, wal_topic_foreach): batches submitted on
 *     it complete with TB_ECLOSED, and wal_topic_open of the name makes a
 *     new topic.
 *   - Re-creating the name (wal_topic_open) writes the new directory's meta
 *     with floor = next, checkpoint = next - 1 and the entry's counters
 *     (forgotten messages added to dropped), then drops the entry.
 *   - A kill at any point is finished at the next wal_open: a directory
 *     whose name has an entry and whose meta floor is below the entry's
 *     next (or which has no meta) is a removal interrupted, finished then;
 *     one whose floor is at or above it was re-created, and the entry goes.
 */
typedef enum {
    WAL_RETIRE_REMOVE = 0, /* drained: write the entry, remove the directory */
    WAL_RETIRE_KEEP = 1,   /* drained: nothing more (wal.retire: keep; the caller stops using it) */
    WAL_RETIRE_FORGET = 2, /* whatever the backlog: the entry flags FORGOTTEN and counts it */
} wal_retire_t;

#define WAL_RETIRED_FORGOTTEN 1u /* wal_retired_t.flags: removed with a backlog (forget) */

/* An entry of <wal.dir>/RETIRED. */
typedef struct wal_retired {
    char *name;            /* the topic (malloc'd in tables wal/ returns) */
    uint16_t flags;        /* WAL_RETIRED_FORGOTTEN */
    uint64_t next;         /* the first offset a re-created topic of this name uses */
    uint64_t checkpoint;   /* at removal */
    uint64_t dropped, lost, quarantined, dropped_age; /* the meta file's counters at removal */
    uint64_t forgotten;    /* messages deleted unreplicated (FORGET; 0 for a retirement) */
    uint64_t removed_ms;   /* wall clock */
} wal_retired_t;

/* Retires t as `how` says (above), on the writer; blocks until done. Any
 * thread but the writer; t must not be read after it (close its readers
 * and cursors first). Returns 0 (and, if out is not NULL, fills *out with
 * the entry: out->name is t's name, not to be freed; KEEP fills it as it
 * would be written), TB_EBUSY when t is not drained (REMOVE, KEEP) or the
 * memory tier or the BLOCK policy holds batches of it (every mode),
 * TB_ENOTREADY when t is FAILED, TB_ECLOSED when already retired, or the
 * RETIRED write's -errno (nothing changed). A failure while removing the
 * directory after the entry was written is logged and finished at the next
 * wal_open; the topic is retired all the same. */
int wal_topic_retire(wal_topic_t *t, wal_retire_t how, wal_retired_t *out /* OUT, may be NULL */);
/* The RETIRED table of an open log, in name order, copied (free with
 * wal_retired_free). */
int wal_retired_list(wal_t *w, wal_retired_t **out /* OUT */, size_t *n /* OUT */);
void wal_retired_free(wal_retired_t *v, size_t n);

/*
 * <wal.dir>/LOCK: wal_open holds flock(LOCK_EX | LOCK_NB) on it until
 * wal_close, so a second process (another gateway, an offline tool that
 * writes) is refused with -EWOULDBLOCK while one runs. The lock dies with
 * its process: no stale pid file after a SIGKILL. wal_lock_dir takes it
 * (creating LOCK if create, else -ENOENT when there is none); *fd is then
 * the open descriptor, for wal_unlock_dir.
 */
int wal_lock_dir(const char *dir, bool create, int *fd /* OUT */);
void wal_unlock_dir(int fd);

/*
 * Offline (tributary wal retire|forget TOPIC --dir DIR): opens the log at
 * dir (its lock: -EWOULDBLOCK while a gateway runs), retires topic as `how`
 * says (REMOVE or FORGET), prints what happened to report (may be NULL) and
 * closes it. Returns 0, -ENOENT (no such topic), TB_EBUSY (a backlog, and
 * not FORGET; the message says how large), or an error of the open.
 */
int wal_retire_offline(const char *dir, const char *topic, wal_retire_t how, FILE *report);

typedef struct wal_topic_stats {
    uint64_t bytes;           /* on disk, all segments */
    uint32_t segments;
    uint64_t oldest_offset;   /* first offset still on disk */
    uint64_t next_offset;     /* the offset the next message will get */
    uint64_t readable_end;    /* see wal_topic_readable_end */
    uint64_t checkpoint;
    uint64_t dropped_total;   /* deleted by a bound (or quarantined) before being acked; persistent */
    uint64_t lost_total;      /* acked in INTERVAL/NEVER mode, then lost to an fdatasync error; persistent */
    uint64_t quarantined_segments; /* persistent */
    uint64_t dropped_age_total; /* dropped for being older than the topic's max_age
                                   (wal_checkpoint_ex); persistent (meta version 2) with the
                                   checkpoint that passed them; like checkpoint, it includes
                                   what is not persisted yet */
    uint64_t reserved;        /* the durable offset reservation (OFFSET RESERVATION; 0: none) */
    uint64_t hole_from;       /* [hole_from, hole_to): offsets with no record that the last open
                                 skipped for a reservation, behind records not yet acknowledged;
                                 reported while the checkpoint is below hole_to - 1 (0, 0: none) */
    uint64_t hole_to;
    uint64_t write_errors;    /* failed writes and syncs since open */
    wal_mode_t mode;          /* MEMORY TIER */
    uint64_t spills[WAL_SPILL__COUNT]; /* spills since open, by reason */
    uint64_t to_memory;       /* returns from DRAINING to MEMORY since open */
    uint64_t holddown_ms;     /* the hold-down the next return waits for */
    uint64_t ack_latency_ms;  /* ms from a log batch being readable to its acknowledgement, the
                                 newest sample; a return to memory needs it below
                                 spill_after_ms / 2 (UINT64_MAX: none since the last spill) */
    uint64_t held_msgs;       /* records held in memory, not yet acknowledged */
    uint64_t held_bytes;      /* their batches' bytes */
    wal_topic_state_t state;
    int last_error;
    /* This process's share, for the gateway's accounting invariant. Read
     * under the lock wal_checkpoint_floor takes, so they agree with it. */
    uint64_t open_offset;        /* next_offset when the log was opened: offsets at or
                                    above it were written by this process */
    uint64_t dropped_since_open; /* of dropped_total: records at or above open_offset */
    uint64_t spill_lost_since_open; /* of dropped_since_open: answered (ack: received) records
                                       lost with a spill that could not be written (MEMORY
                                       TIER); the rest were deleted by a bound or set aside */
    uint64_t drop_floor;         /* offsets below it were deleted by a bound since open (0: none) */
    /* The topic's bound (see OWN BOUND). */
    bool own_bound;              /* wal_topic_set_own_bound: outside max_total_bytes, never
                                    the total bound's victim, refuses when full */
    uint64_t max_bytes;          /* what bounds bytes: the own bound, else wal.max_topic_bytes */
} wal_topic_stats_t;

void wal_topic_stats(wal_topic_t *t, wal_topic_stats_t *out /* OUT */);

/*
 * A place in a topic's log: the offset a reader looks for next and, when
 * `exact`, the byte where that record starts in segment seg_base (a reader
 * that has the segment open knows it; one that has not read yet, or just
 * jumped a gap, does not). See wal_reader_pos.
 */
typedef struct wal_pos {
    uint64_t offset;
    uint64_t seg_base;
    uint64_t byte;
    bool exact;
} wal_pos_t;

/*
 * Bytes of the topic's log on disk from pos to its end (any thread; one
 * walk of the segment list under its lock). Exact when pos is exact; else
 * counted from the start of the segment holding pos->offset (an
 * over-estimate by at most the records before it in that segment). A
 * position in a segment deleted since counts everything on disk.
 * Segment headers are included: this is what the disk holds.
 */
uint64_t wal_topic_bytes_after(wal_topic_t *t, const wal_pos_t *pos);

/*
 * WHAT THE LOG WRITES, BY CAUSE (wear accounting: docs/WAL.md "Flash
 * wear", docs/design/MEMORY-FIRST.md 5). Every write and sync of a running
 * log is counted under the reason it was made:
 *   record      message records (wal_submit's batches, a spill's)
 *   pad         padding records up to the page end before a sync (pad.c)
 *   probe       the free-space probe's zeros (cut back at once)
 *   segment     a new segment's header (its file created, synced, named)
 *   checkpoint  meta replaced to persist a checkpoint (or a slot's)
 *   reserve     meta replaced for an offset reservation (or its release)
 *   drop        meta replaced for drops: a bound's, a corrupt segment set
 *               aside, a refused spill's losses
 *   switch      the memory tier's return to memory (T2: checkpoint and
 *               reservation written together)
 *   repair      recovery's rewrite of a damaged tail and its meta
 *   state       an output's state blob (wal_state_put)
 *   other       topic directories, OUTPUTS, RETIRED
 * bytes are what was handed to write(2)/pwrite(2), never what the device
 * wrote: an atomic replace of a 100 B meta file is 100 B here and one
 * 4 KiB page (plus a journal commit) in /proc/<pid>/io write_bytes, so
 * writes (calls, one per replaced file) is the number to multiply by the
 * page size. syncs are fdatasync/fsync calls, a directory's included (an
 * atomic replace is two: the file and its directory). Since wal_open;
 * lock-free, any thread may read while the writer counts.
 */
typedef enum {
    WAL_CAUSE_RECORD, WAL_CAUSE_PAD, WAL_CAUSE_PROBE, WAL_CAUSE_SEGMENT, WAL_CAUSE_CHECKPOINT,
    WAL_CAUSE_RESERVE, WAL_CAUSE_DROP, WAL_CAUSE_SWITCH, WAL_CAUSE_REPAIR, WAL_CAUSE_STATE,
    WAL_CAUSE_OTHER, WAL_CAUSE__COUNT
} wal_cause_t;

typedef struct wal_stats {
    uint64_t bytes[WAL_CAUSE__COUNT];  /* handed to write/pwrite */
    uint64_t writes[WAL_CAUSE__COUNT]; /* write calls (full transfers), one per file replaced */
    uint64_t syncs[WAL_CAUSE__COUNT];  /* fdatasync/fsync calls, directories' included */
} wal_stats_t;

void wal_stats(wal_t *w, wal_stats_t *out /* OUT */);
/* "record", "pad", ... (the metrics' and /stats' cause label); "?" out of range */
const char *wal_cause_name(wal_cause_t c);

/* fdatasync durations: bucket i counts durations in [2^i, 2^(i+1)) microseconds
 * (bucket 0 also holds < 1 us; the last bucket is open-ended). Lock-free;
 * any thread may read while the writer records. */
#define WAL_FSYNC_HIST_BUCKETS 24
typedef struct wal_fsync_hist {
    uint64_t buckets[WAL_FSYNC_HIST_BUCKETS];
    uint64_t count;
    uint64_t sum_us;
    uint64_t max_us;
} wal_fsync_hist_t;

void wal_fsync_hist(wal_t *w, wal_fsync_hist_t *out /* OUT */);

/* The smallest bucket upper bound (us) at or below which a fraction q of samples lie. */
uint64_t wal_fsync_hist_quantile(const wal_fsync_hist_t *h, double q);

/*
 * FREE SPACE. The file system holding the log may be shared (an SD card
 * with the OS and other programs): below the floor, the larger of
 * min_free_bytes and min_free_permille of its size, the log behaves as at
 * max_total_bytes (every topic's overflow policy acts: drop_oldest deletes
 * the oldest sealed segments across topics, a refusing policy refuses),
 * and it recovers on its own when space returns; a topic with an own bound
 * (the session journal) is exempt. The writer's estimate: a statvfs
 * reading (at open, every space_check_ms, after it deleted segments, after
 * a write failed for want of space, at wal_sync), less what the log grew
 * by since. A deletion counts as freed at once; a segment a reader still
 * has open returns its blocks when the reader leaves it (the next reading
 * shows it), so at most one segment per reader goes more than needed.
 * Any thread.
 */
typedef struct wal_space {
    bool known;              /* statvfs read the file system (else the floor is off) */
    uint64_t free_bytes;     /* the estimate (statvfs f_bavail, less what the log wrote since) */
    uint64_t fs_bytes;       /* the file system's size */
    uint64_t min_free_bytes; /* the floor in bytes (0: off) */
    uint64_t readings;       /* statvfs calls that worked */
} wal_space_t;
void wal_space(wal_t *w, wal_space_t *out /* OUT */);

/* ---- batches (event-loop thread) ------------------------------------------ */

typedef struct wal_attr {
    const uint8_t *key;
    size_t key_len;   /* <= 65535 */
    const uint8_t *val;
    size_t val_len;   /* <= 65535 */
} wal_attr_t;

/* One message to append. Every pointer is only read during wal_batch_add. */
typedef struct wal_msg {
    const uint8_t *payload;
    size_t payload_len;
    const wal_attr_t *attrs;
    size_t nattrs;             /* <= 255 */
    const char *mqtt_topic;    /* the topic the device published to */
    size_t mqtt_topic_len;     /* <= 65535 */
    uint64_t publish_time_ms;
    uint8_t qos;               /* 0..2 */
    bool retain;
    bool has_schema;
    uint64_t schema_id;
    uint32_t schema_version;
} wal_msg_t;

/* A new empty batch for topic t (loop thread). The caller owns it until wal_submit. */
wal_batch_t *wal_batch_new(wal_topic_t *t);

/*
 * Copies m into the batch, once, already laid out as an on-disk record (the
 * writer fills in the offset and CRC). Returns 0; -EINVAL for a field out of
 * range (qos, lengths, count); -EMSGSIZE if the record alone could never fit
 * a segment; TB_EFULL if the batch is full (submit it and start another:
 * a batch never exceeds segment_bytes). On error the batch is unchanged.
 */
int wal_batch_add(wal_batch_t *b, const wal_msg_t *m);

uint32_t wal_batch_count(const wal_batch_t *b);
size_t wal_batch_bytes(const wal_batch_t *b);

/*
 * Hands b to the writer thread; the batch belongs to the WAL until it comes
 * back through wal_take_done(). Never fails here: every submitted batch
 * comes back exactly once, with rc 0 or an error (TB_ECLOSED after
 * wal_close started, TB_EFULL or -errno for a failed topic). An empty batch
 * completes with rc 0 and count 0. (Only in the TB_ECLOSED case is the
 * completion posted, and notify called, on the calling thread; and for a
 * topic in the memory tier, where the batch is held, not written, and
 * completed on the thread that moves the checkpoint past it, or here with
 * ack RECEIVED: see MEMORY TIER.)
 */
void wal_submit(wal_batch_t *b, void *user);

/*
 * Splices out every completed batch, oldest first, as a list linked by
 * wal_batch_next() (read the next one before freeing a batch). NULL when
 * none. Loop thread.
 */
wal_batch_t *wal_take_done(wal_t *w);
wal_batch_t *wal_batch_next(const wal_batch_t *b);

typedef struct wal_completion {
    int rc;                /* 0, or why nothing of the batch is stored */
    uint64_t first_offset; /* offsets first_offset .. first_offset + count - 1 */
    uint32_t count;
    bool refused_at_bound; /* rc is the topic's overflow policy refusing at a bound (see
                              OVERFLOW): nothing was written and the topic is OK; false for
                              every other error (a failed topic, a failed write, closing) */
    void *user;            /* as given to wal_submit */
    wal_topic_t *topic;
} wal_completion_t;

const wal_completion_t *wal_batch_completion(const wal_batch_t *b);

/* Frees a batch that was never submitted or has come back. */
void wal_batch_free(wal_batch_t *b);

/* ---- readers (any thread, typically the replicator) ----------------------- */

/* A record read back. Pointers are views valid until the next call on the reader. */
typedef struct wal_record {
    uint64_t offset;
    uint64_t publish_time_ms;
    uint8_t qos;
    bool retain;
    bool has_schema;
    uint64_t schema_id;
    uint32_t schema_version;
    const uint8_t *payload;
    uint32_t payload_len;
    const char *mqtt_topic;    /* not NUL-terminated */
    uint16_t mqtt_topic_len;
    uint8_t nattrs;
    const uint8_t *attrs_raw;  /* use wal_record_attr_next */
    uint32_t attrs_raw_len;
    const uint8_t *raw;        /* the whole on-disk record (tools and checks) */
    uint32_t raw_len;
} wal_record_t;

/* Iterates a record's attributes: *pos starts at 0; returns false at the end. */
bool wal_record_attr_next(const wal_record_t *r, size_t *pos, wal_attr_t *out /* OUT */);

/* wal_reader_next() results besides 0 (a record) and errors (< 0). */
enum {
    WAL_END = 1, /* nothing more is readable now: retry when wal_topic_readable_end moves */
    WAL_GAP = 2, /* the wanted offsets are not in the log (deleted by a bound or a
                    quarantine, or never written: see wal_reader_gap_kind); the reader
                    moved forward: see wal_reader_gap(). No record returned. */
};

/*
 * Opens a reader positioned at from_offset (typically checkpoint + 1; below
 * the oldest offset on disk the first call reports WAL_GAP). Returns 0 and
 * *out, or -errno. The reader has its own file descriptor and a 256 KiB read
 * buffer; it survives rotation and retention.
 */
int wal_reader_open(wal_topic_t *t, uint64_t from_offset, wal_reader_t **out /* OUT */);

/*
 * Returns 0 and the record at the reader's position (then moves past it),
 * WAL_END, WAL_GAP, or an error (-errno reading; TB_ECORRUPT if the
 * newest data fails its checksum). A corrupt sealed segment is reported to
 * the writer (which quarantines it) and skipped with WAL_GAP.
 */
int wal_reader_next(wal_reader_t *r, wal_record_t *out /* OUT */);

/* Repositions the reader. Returns 0 or -errno. */
int wal_reader_seek(wal_reader_t *r, uint64_t offset);
/* The offset the next wal_reader_next() looks for. */
uint64_t wal_reader_offset(const wal_reader_t *r);
/* Where the next record starts (for wal_topic_bytes_after). */
void wal_reader_pos(const wal_reader_t *r, wal_pos_t *out /* OUT */);
/* The reader's buffer, in bytes: 16 KiB while it follows the live end,
 * doubled up to 256 KiB by a backlog (each pread that fills it whole),
 * halved after 16 WAL_ENDs in a row; larger only for a record that needs it. */
size_t wal_reader_buffer(const wal_reader_t *r);
/* After WAL_GAP: the skipped range [*from, *to) and the total skipped so far. */
uint64_t wal_reader_gap(const wal_reader_t *r, uint64_t *from /* OUT */, uint64_t *to /* OUT */);
/*
 * After WAL_GAP: what the skipped range was.
 *   DROPPED  records that were in the log and left it before being
 *            acknowledged: a bound deleted them (below the oldest segment,
 *            or below the topic's read floor), or a corrupt sealed segment
 *            was quarantined. They are in dropped_total: a loss to count
 *            and warn about.
 *   HOLE     offsets that hold no record and never will, and lose nothing:
 *            an offset range recovery skipped for the reservation (or left
 *            by an active segment quarantined at recovery: a new segment
 *            starts past it), offsets acknowledged while they were held in
 *            memory (the memory tier), or offsets at or below the
 *            checkpoint. Not in dropped_total; not a loss.
 * A gap that covers both is DROPPED. Before any gap: DROPPED.
 */
typedef enum { WAL_GAP_DROPPED = 0, WAL_GAP_HOLE = 1 } wal_gap_kind_t;
wal_gap_kind_t wal_reader_gap_kind(const wal_reader_t *r);
void wal_reader_close(wal_reader_t *r);

/* ---- offline tools (the CLI calls these; they take no lock) ---------------- */

/*
 * Prints one JSON object per valid record, per line, for one topic (or all
 * when topic is NULL), from from_offset: topic, offset, publish_time, qos,
 * retain, mqtt_topic, attributes (object), schema_id and schema_version if
 * present, and payload: a string when it is valid UTF-8, else base64 with
 * "payload_encoding":"base64". Returns 0, or -errno / TB_EINVALID.
 */
int wal_dump(const char *dir, const char *topic, uint64_t from_offset, FILE *out);

/*
 * Verifies every header and record CRC under dir and prints one JSON object
 * per topic: first/last offset, records, bytes (all of the segment files),
 * padding_bytes (of those, in padding records), segments, from the meta
 * file checkpoint, dropped, lost, dropped_age, reserved and meta_version
 * (0 when absent or unreadable) beside meta ("ok", "absent", "corrupt",
 * "unsupported": a newer version), corrupt segments (including
 * quarantined ones) and the torn tail bytes of the active segment. Then one
 * object per output with state blobs ({"output","id","state":{key:{"bytes",
 * "status"}}}) and one per RETIRED entry ({"retired":topic,"next",
 * "checkpoint","dropped","forgotten","forgot","removed_ms"}; a damaged file is
 * {"retired_file":"corrupt"}). Returns 0 when nothing is corrupt, 1 when
 * something is (an unreadable meta file, a damaged blob or RETIRED file
 * included), or a negative error.
 */
int wal_check(const char *dir, FILE *out);

#endif
