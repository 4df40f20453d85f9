/*
 * wal_int.h: what the files of wal/ share and nobody else sees.
 *
 * Ownership, in one place:
 *   - wal_t: created by wal_open, freed by wal_close. The submission queue
 *     (items) is guarded by w->mu; the completion list is a tb_mbox.
 *   - wal_topic_t: created by recovery or a topic-open request, freed by
 *     wal_close. Fields marked [W] belong to the writer thread (and to
 *     wal_open before the thread starts). The segment array is written only
 *     by the writer, always under t->mu, and read by readers and stats under
 *     t->mu. Fields marked [A] are atomics any thread may read.
 *   - wal_batch_t: owned by the loop until wal_submit, by the writer until
 *     pushed on the done list, then by the loop again.
 */
#ifndef WAL_INT_H
#define WAL_INT_H

#include "wal/wal.h"
#include "wal/wal_format.h"

#include <stdatomic.h>

/* ---- queue items: batches and requests share one FIFO so order holds ------ */

enum { WAL_ITEM_BATCH, WAL_ITEM_OPEN, WAL_ITEM_SYNC, WAL_ITEM_QUARANTINE, WAL_ITEM_OWN_BOUND, WAL_ITEM_RESERVE,
       WAL_ITEM_MEMORY, WAL_ITEM_SPILL, WAL_ITEM_STATE, WAL_ITEM_RETIRE };

typedef struct wal_item {
    struct wal_item *next;
    int kind;
} wal_item_t;

struct wal_batch {
    tb_mnode_t node;   /* on the done list */
    wal_item_t item;   /* on the submission queue */
    struct wal_batch *round_next; /* in the writer's current group-commit round */
    wal_topic_t *t;
    uint8_t *buf;      /* records laid out as on disk; offset and CRC blank until written */
    size_t len, cap;
    uint32_t count;
    wal_completion_t c;
    /* the memory tier (memory.c), under t->mem.mu while held */
    struct wal_batch *mem_next; /* held list, offset order */
    bool posted;       /* its completion went to the done list already */
    bool in_wq;        /* counted in t->wq while at the writer */
    uint64_t held_ms;  /* when it was held (monotonic): the spill timeout counts from here */
    _Atomic int refs;  /* owners: the loop (from its completion on) and the tier (while held) */
};

/* A request to the writer. OPEN, SYNC, OWN_BOUND and RESERVE are waited on (done
 * under w->mu, w->req_cond broadcast); QUARANTINE is fire-and-forget (writer
 * frees it). */
typedef struct wal_req {
    wal_item_t item;
    int rc;
    bool done;
    const char *name;      /* OPEN */
    wal_topic_t *topic;    /* OPEN result; QUARANTINE, OWN_BOUND and RESERVE target */
    uint64_t base;         /* QUARANTINE: segment */
    uint64_t bad_offset;   /* QUARANTINE: first offset that failed */
    uint64_t max_bytes;    /* OWN_BOUND: the topic's own bound */
    uint64_t end;          /* RESERVE: offsets below it must be covered */
    wal_memory_opts_t mo;  /* MEMORY: the options */
    uint16_t out_id;       /* STATE: the output, the key, the blob */
    const char *key;
    const void *data;
    size_t len;
    wal_retire_t how;      /* RETIRE: how, and the entry written */
    wal_retired_t entry;
} wal_req_t;

/* The memory tier of a topic (memory.c; wal.h MEMORY TIER). Lock order:
 * mem.mu, then w->mu or the done list's; the writer never takes mem.mu
 * while holding w->mu. */
typedef struct wal_mem {
    pthread_mutex_t mu;
    wal_batch_t *head, *tail;     /* held batches, offset order, contiguous from lo */
    uint64_t lo;                  /* first offset held; == next when nothing is */
    uint64_t next;                /* the offset the next held record gets (MEMORY) */
    uint64_t held_bytes, held_msgs;
    uint64_t read_hi;             /* highest offset a reader took from memory (0: none) */
    wal_memory_opts_t o;
    wal_spill_t why;              /* the reason of the spill queued (SPILLING) */
    uint64_t spills[WAL_SPILL__COUNT];
    uint64_t to_memory;           /* READY -> MEMORY switches */
    uint64_t enter_ms;            /* when DRAINING began (monotonic) */
    uint64_t holddown_ms;         /* DRAINING lasts at least this (2.7 of the design) */
    uint64_t memory_ms;           /* when the topic last went to MEMORY (0: never) */
    bool sticky;                  /* a SHUTDOWN spill: never back to memory */
    /* T2 rule (d): the acknowledgement latency of what the log holds. The
     * writer notes when each disk batch became readable (the newest 64);
     * the checkpoint passing one turns the newest passed into the sample. */
    pthread_mutex_t lat_mu;       /* lat, nlat: the writer pushes, the ack path takes */
    struct { uint64_t end, ms; } lat[64]; /* readable end after a disk batch, and when; oldest first */
    unsigned nlat;
    _Atomic uint64_t ack_lat_ms;  /* the newest sample; UINT64_MAX: none since the last spill */
} wal_mem_t;

/* A reader's place in the memory tier (reader.c keeps one, memory.c moves it). */
typedef struct wal_mem_cursor {
    const wal_batch_t *b;         /* the batch holding off, if b_first is still held */
    uint64_t b_first;             /* b's first offset: b is valid while b_first >= mem.lo */
    size_t pos;                   /* byte of off's record in b */
    uint64_t off;                 /* the offset at pos */
    uint8_t *buf;                 /* the copy of the record returned last (views point here) */
    size_t cap;
} wal_mem_cursor_t;

/* ---- cursor slots (cursor.c; wal.h CURSORS) -------------------------------- */

enum { WAL_SLOT_ACTIVE = 1, /* retention waits for it */
       WAL_SLOT_PARKED = 2  /* kept (checkpoint, drops counted), not waited for */ };

/* One output's place in a topic, under t->acct_mu. */
typedef struct wal_slot {
    uint16_t id;                  /* the output's id (<wal.dir>/OUTPUTS) */
    uint8_t state;                /* WAL_SLOT_ACTIVE | WAL_SLOT_PARKED */
    bool protects;
    bool opened;                  /* a cursor (for id 0: wal_checkpoint) took it since the open */
    wal_cursor_t *cur;            /* the open cursor, or NULL */
    uint64_t ck;                  /* its checkpoint */
    uint64_t drop_floor;          /* offsets below it were deleted above ck (0: none) */
    uint64_t dropped_open;        /* of its drops, offsets >= open_next */
    uint64_t dropped;             /* persisted: its drops, as in the meta file */
    uint64_t dropped_age;         /* with what wal_cursor_ack_ex added since the last meta write */
} wal_slot_t;

struct wal_cursor {
    wal_topic_t *t;
    uint16_t id;
    size_t idx;                   /* in t->slots: stable (slots only go offline) */
};

/* ---- segments and topics ------------------------------------------------- */

typedef struct wal_seg {
    uint64_t base;
    uint64_t bytes;       /* file size */
    uint64_t created_ms;
    uint64_t end;         /* sealed: the offset after its last record (its records are
                           * [base, end): THE RULE makes them contiguous), set at rotation
                           * and by recovery; 0: not known (the next segment's base is
                           * taken). The active segment's is not used: disk_end is */
} wal_seg_t;

struct wal_topic {
    wal_t *w;
    char *name;
    char *dir;                    /* <wal.dir>/<encoded name> */
    pthread_mutex_t mu;           /* guards segs/nsegs */
    wal_seg_t *segs;              /* sorted by base; the last one is active */
    size_t nsegs, segs_cap;

    /* [W] the active segment */
    int fd;                       /* -1 when there is none (failed repair) */
    uint64_t wpos;                /* bytes written (file size) */
    uint64_t spos;                /* bytes known synced */
    uint32_t seed;                /* CRC seed from the active segment's salt */
    uint64_t next;                /* offset for the next record */
    uint64_t synced_next;         /* everything below is synced */
    uint64_t bytes;               /* sum of segs[].bytes */
    bool dirty;                   /* written since the last fdatasync */
    bool touched;                 /* written in the current group-commit round */
    int round_sync_rc;            /* fdatasync result of this round */
    wal_batch_t *held_head, *held_tail; /* BLOCK: batches waiting for room, in order (round_next) */
    bool spill_parked;            /* [W] BLOCK: the memory tier's spill waits for room (writer.c
                                     spill): the topic stays SPILLING, its later batches held */
    bool needs_repair;            /* on-disk state unknown: re-run recovery first */
    bool switching;               /* [W] inside the return to memory (T2): its meta writes
                                     count as WAL_CAUSE_SWITCH (wal_stats) */
    bool rewrite_unsynced;        /* an fdatasync failed with acked data after spos */
    uint64_t retry_at_ms;
    uint64_t probe_bytes;         /* a retry must first be able to write this much */
    wal_meta_t meta;              /* as persisted */
    uint64_t ck_persist_at_ms;    /* earliest time the next checkpoint write may happen */
    uint64_t res_retry_at_ms;     /* a reservation write failed: try again then (0: none) */

    /* the memory tier (memory.c) */
    wal_mem_t mem;
    _Atomic int mode;             /* wal_mode_t */
    _Atomic uint64_t mem_end;     /* mem.next as published (0: never in memory) */
    _Atomic uint64_t head_ms;     /* MEMORY: held_ms of the oldest held batch (0: none) */
    _Atomic uint32_t spill_after; /* mem.o.spill_after_ms, for the writer's deadline */
    _Atomic uint64_t drain_at;    /* DRAINING: when the hold-down ends (0: not DRAINING) */
    _Atomic uint32_t wq;          /* batches of t at the writer, counted while t has a memory
                                   * tier (mem_end != 0): READY -> MEMORY needs none */
    uint64_t seg_next;            /* [W] the offset after the active segment's last record:
                                   * append starts a new segment when t->next differs */

    /* [A] */
    _Atomic uint64_t readable_end;/* max(disk_end, mem_end) */
    _Atomic uint64_t disk_end;    /* the readable end of the log on disk (wal__publish) */
    _Atomic uint64_t cut_gen;     /* bumped when unsynced bytes were cut and their offsets may be
                                   * written again (a failed write or sync, repair): a reader drops
                                   * what it buffered, which may hold the cut records */
    _Atomic uint64_t ck_req;      /* latest checkpoint asked for */
    _Atomic bool ck_pending;      /* ck_req moved since the writer last looked */
    _Atomic uint64_t next_pub;    /* copy of next for stats */
    _Atomic uint64_t log_next;    /* copy of seg_next: the active segment's records end there
                                   * (next_pub includes what memory holds, next a spill's hole) */
    _Atomic uint64_t dropped;
    _Atomic uint64_t read_floor;  /* a bound deleted and counted (persisted) everything below: readers skip it */
    _Atomic uint64_t lost;
    _Atomic uint64_t quarantined;
    _Atomic uint64_t dropped_age; /* meta.dropped_age as persisted, plus what wal_checkpoint_ex
                                   * added since (moved under acct_mu with ck_req: the writer reads
                                   * both under it and persists them in one meta write) */
    _Atomic uint64_t reserved;    /* meta.reserved as persisted (OFFSET RESERVATION in wal.h): set
                                   * only after the meta write returned (reserve.c) */
    _Atomic uint64_t res_used;    /* the highest end declared by wal_topic_reserve (0: none) */
    _Atomic bool res_pending;     /* a raise was asked for since the writer last looked */
    _Atomic uint64_t hole_from;   /* [hole_from, hole_to): offsets recovery skipped for the
                                   * reservation, with records above the checkpoint before them */
    _Atomic uint64_t hole_to;
    _Atomic uint64_t q_lo;        /* [q_lo, q_hi): spans every sealed segment quarantined with
                                   * its offsets counted as dropped (q_hi 0: none), so a reader
                                   * tells that gap between two segments from a hole (reader.c).
                                   * Written by the writer (or recovery) only */
    _Atomic uint64_t q_hi;
    _Atomic uint64_t write_errors;
    _Atomic int state;
    _Atomic int last_error;
    _Atomic bool retry_now;
    _Atomic int overflow;         /* wal_overflow_t: opts->overflow, or wal_topic_set_overflow */
    _Atomic bool blocked;         /* held_head != NULL or spill_parked (wal_topic_blocked); the writer sets it */
    _Atomic bool release_held;    /* wal_topic_release_held asked: hold nothing more (TB_ECLOSED) */
    _Atomic bool retired;         /* wal_topic_retire removed it (set by the writer, under mem.mu):
                                   * batches complete with TB_ECLOSED */
    _Atomic uint64_t own_bound;   /* 0, or wal_topic_set_own_bound's max_bytes: the topic is then
                                   * outside the total bound (total_bytes leaves it out) and never
                                   * the total bound's victim. Written by the writer only */

    /* [L] acct_mu: the checkpoint moves (wal_checkpoint_floor, any thread)
     * and a bound's drop decision (retention.c, writer) happen under this
     * lock, so an offset is counted either dropped or acknowledged while
     * stored, never both. Never held across I/O. */
    pthread_mutex_t acct_mu;
    uint64_t open_next;           /* next offset when the log was opened (0: not yet) */
    uint64_t drop_floor;          /* offsets below it were deleted by a bound (0: none) */
    uint64_t dropped_open;        /* dropped offsets >= open_next */
    uint64_t spill_lost_open;     /* of dropped_open: answered messages lost with a spill
                                     that could not be written (memory.c, refused) */
    /* the outputs' slots: ck_req is the minimum of ck over the ACTIVE ones
     * (unchanged while none is); slot 0 (id 0) exists from creation */
    wal_slot_t slots[WAL_MAX_CURSORS];
    size_t nslots;

    tb_ratelimit_t drop_rl;       /* "dropping messages" at most once a minute */
    tb_ratelimit_t retry_rl;      /* "still cannot write" at most once a minute */
};

struct wal {
    wal_opts_t o;
    char *dir;
    const wal_io_t *io;
    int lock_fd;

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;           /* guards the queue, stopping, kick */
    pthread_cond_t cond;          /* writer waits here (CLOCK_MONOTONIC) */
    pthread_cond_t req_cond;      /* requesters wait here */
    wal_item_t *q_head, *q_tail;
    bool stopping;
    bool kick;                    /* checkpoint or retry asked for: wake the writer */

    tb_mbox_t done;

    /* <wal.dir>/OUTPUTS (cursor.c): ids by name, guarded by out_mu */
    pthread_mutex_t out_mu;
    char **out_names;             /* out_names[id], NULL for an unused id */
    size_t out_n;

    pthread_mutex_t topics_mu;    /* guards the topics array (sorted by name) */
    wal_topic_t **topics;
    size_t ntopics, topics_cap;
    wal_topic_t **gone;           /* retired topics' handles, freed at wal_close (topics_mu) */
    size_t ngone;

    /* <wal.dir>/RETIRED (retired.c), in name order: [W], and wal_open's */
    pthread_mutex_t ret_mu;       /* guards ret/nret for wal_retired_list */
    wal_retired_t *ret;
    size_t nret;

    /* [W] */
    uint64_t total_bytes;         /* sum of the bytes of topics without an own bound */
    uint64_t last_interval_sync_ms;
    uint32_t pad_align;           /* ALWAYS: synced writes may end on a multiple of this (pad.c) */
    uint8_t *pad_buf;             /* pad_align bytes for the padding record (NULL if 1) */
    int close_rc;

    /* free space (space.c). [A]: any thread reads them (wal_space); only
     * the writer (or wal_open before it starts) writes them. */
    _Atomic uint64_t all_bytes;   /* sum of every topic's bytes, own bounds included */
    _Atomic uint64_t sp_avail;    /* the last statvfs reading: bytes free */
    _Atomic uint64_t sp_base;     /* all_bytes at that reading */
    _Atomic uint64_t sp_total;    /* the file system's size */
    _Atomic uint64_t sp_floor;    /* the floor in bytes, 0: off (resolved at each reading) */
    _Atomic uint64_t sp_readings; /* readings that worked */
    _Atomic bool sp_known;        /* a reading worked */
    uint64_t sp_next_ms;          /* [W] when the next periodic reading is due (0: now) */
    bool sp_short;                /* [W] below the floor at the last reading */
    bool sp_short_logged;         /* [W] and that was logged: the way back above is too */
    tb_ratelimit_t sp_rl;         /* "below the floor": at most once a minute */
    tb_ratelimit_t sp_err_rl;     /* "cannot read the free space": at most once a minute */

    /* fdatasync histogram [A] */
    _Atomic uint64_t h_buckets[WAL_FSYNC_HIST_BUCKETS];
    _Atomic uint64_t h_count, h_sum_us, h_max_us;

    /* what the log wrote, by cause (wal_stats; wstats.c) [A] */
    _Atomic uint64_t c_bytes[WAL_CAUSE__COUNT], c_writes[WAL_CAUSE__COUNT], c_syncs[WAL_CAUSE__COUNT];
};

/* ---- io.c ----------------------------------------------------------------- */

/* Full pwrite/pread loops over the vtable (short counts and EINTR handled). */
int wal__pwrite_all(const wal_io_t *io, int fd, const void *buf, size_t n, uint64_t off);
/* Returns bytes read (< n only at end of file) or -errno. */
ssize_t wal__pread_full(const wal_io_t *io, int fd, void *buf, size_t n, uint64_t off);

/* ---- format.c: record encoding (loop thread) ------------------------------ */

/* Bytes the record for m takes, or 0 if a field is out of range (-EINVAL). */
size_t wal__rec_size(const wal_msg_t *m);
/* Encodes m at out (wal__rec_size(m) bytes), offset and CRC zero. */
void wal__rec_encode(uint8_t *out, const wal_msg_t *m, size_t size);
/* Fills a public record view from a decoded record. */
void wal__rec_view(const wal_rec_t *rec, const uint8_t *raw, wal_record_t *out);

/* ---- topic.c: names, paths, meta ------------------------------------------ */

/* Escapes a topic name into a directory name; returns NULL if invalid. */
char *wal__topic_encode(const char *name);
/* The reverse; NULL if dirname is not an encoded topic name. */
char *wal__topic_decode(const char *dirname);
char *wal__seg_path(const wal_topic_t *t, uint64_t base, const char *suffix);
/* Parses "<20 digits>.seg"; returns true and *base. */
bool wal__seg_name_parse(const char *name, uint64_t *base /* OUT */);
wal_topic_t *wal__topic_new(wal_t *w, const char *name, const char *dir);
void wal__topic_free(wal_topic_t *t);
/* Inserts t into w's sorted topic array. */
void wal__topic_register(wal_t *w, wal_topic_t *t);
/* Atomically replaces the topic's meta file with m; on success t->meta = *m. */
int wal__meta_write(wal_topic_t *t, const wal_meta_t *m, wal_cause_t why /* counted under it, or switch */);
/* Reads the meta file: 0 (found), -ENOENT (absent), TB_EUNSUPPORTED (a newer
 * version) or TB_ECORRUPT; *version is the file's (0 unless found). */
int wal__meta_read(const wal_io_t *io, const char *dir, wal_meta_t *m /* OUT */, unsigned *version /* OUT, or NULL */);
void wal__topic_set_failed(wal_topic_t *t, int rc);

/* ---- segment.c ------------------------------------------------------------ */

typedef struct wal_scan {
    int hdr_rc;           /* 0, TB_ECORRUPT or TB_EUNSUPPORTED */
    wal_seghdr_t hdr;
    uint64_t size;        /* file size */
    uint64_t valid_end;   /* position after the last valid record */
    uint64_t count;       /* valid records */
    uint64_t next;        /* offset after the last valid record (hdr.base if none) */
    uint64_t pad_bytes;   /* in padding records inside the valid prefix */
} wal_scan_t;

typedef int (*wal_scan_cb)(void *arg, const wal_rec_t *rec, const uint8_t *raw);

/*
 * Reads the header and the longest valid prefix of records of an open
 * segment file, calling cb (if any) for each record (never for padding); cb returning non-zero
 * stops the scan (its value is returned). name_base is the base from the
 * file name (the header must agree). Returns 0 (header problems are in
 * out->hdr_rc) or -errno.
 */
int wal__seg_scan(const wal_io_t *io, int fd, uint64_t name_base, wal_scan_t *out /* OUT */,
                  wal_scan_cb cb, void *arg);

/* Creates segment <base>.seg for t: header written and synced under .tmp,
 * renamed, directory synced. Returns the open fd (O_RDWR) or -errno. */
int wal__seg_create(wal_topic_t *t, uint64_t base, wal_seghdr_t *hdr /* OUT */);

/* Appends a segment to t->segs (under t->mu). */
void wal__segs_push(wal_topic_t *t, const wal_seg_t *s);
/* Removes segs[i] (under t->mu). */
void wal__segs_remove(wal_topic_t *t, size_t i);
/* fdatasync via the vtable, timed into the histogram. */
int wal__fdatasync(wal_t *w, int fd, wal_cause_t why);

/* ---- wstats.c --------------------------------------------------------------- */

/* Counts one write of n bytes (n 0: a sync only) and `syncs` syncs under why. */
void wal__count(wal_t *w, wal_cause_t why, size_t n, unsigned syncs);
/* pwrite_all, counted under why when it succeeds */
int wal__pwrite_counted(wal_t *w, wal_cause_t why, int fd, const void *buf, size_t n, uint64_t off);
/* io->write_atomic, counted under why (one write, two syncs) when it succeeds */
int wal__write_atomic(wal_t *w, wal_cause_t why, const char *path, const void *buf, size_t n);
/* io->fsync_dir, counted under why */
int wal__fsync_dir(wal_t *w, wal_cause_t why, const char *dir);

/* ---- pad.c ----------------------------------------------------------------- */

/* The alignment padding aims at for files in dir: the page size, or the
 * file system's st_blksize if that is a larger power of two up to WAL_PAD_MAX. */
uint32_t wal__pad_align(const char *dir);
/* The policy: bytes of padding to append at wpos (the end of the active
 * segment's log) before the sync that makes [spos, wpos) durable, so that
 * the sync ends on a multiple of align; 0 for none. Bounds are the caller's. */
uint64_t wal__pad_len(uint64_t wpos, uint64_t spos, uint32_t align, uint64_t segment_bytes);

/* ---- recover.c ------------------------------------------------------------ */

/*
 * Brings t's in-memory state in line with its directory: finishes
 * interrupted deletions, quarantines corrupt sealed segments, cuts a torn
 * tail off the active segment (rewriting the unsynced part first if
 * t->rewrite_unsynced), syncs it, and makes sure an active segment exists
 * at the next offset. Used at open and to repair a failed topic. Returns 0
 * or -errno (the topic stays unusable).
 */
int wal__topic_recover(wal_topic_t *t);

/* ---- retention.c ---------------------------------------------------------- */

/* wal__make_room's answer when the policy made no room: the batch is refused
 * (wal__overflow_refuse says with what); positive, so never an errno. */
enum { WAL_NO_ROOM = 1 };
/* wal__overflow_refuse's answer for a policy that waits (BLOCK): the writer
 * holds the batch and tries it again when it next wakes (writer.c). */
enum { WAL_HOLD = 2 };

/* Sets t->bytes (writer thread) and moves the WAL's total_bytes by the same
 * amount, unless t has an own bound (outside the total). Every change of a
 * topic's bytes goes through here, so the total is always the sum of the
 * topics it covers. */
void wal__topic_bytes_set(wal_topic_t *t, uint64_t bytes);
/* t's bound: its own bound if it has one, else max_topic_bytes. */
uint64_t wal__topic_max(const wal_topic_t *t);
/* Whether need more bytes in t fit its bound and, unless t has an own
 * bound, the total bound and the free-space floor (space.c). */
bool wal__room(const wal_topic_t *t, uint64_t need);
/* Which bound has no room for need more bytes in t, by its configuration
 * name ("max_topic_bytes", "own_bound", "max_total_bytes",
 * "min_free_bytes"), with its size and what it holds (for the floor: the
 * floor and the free bytes left), for the refusal's warning. */
const char *wal__full_bound(const wal_topic_t *t, uint64_t need, uint64_t *max /* OUT */, uint64_t *used /* OUT */);
/* Applies every checkpoint that moved and is not persisted yet, of the
 * topics inside the total bound, where that deletes a segment (their
 * acknowledged segments go): what the floor and a refusing policy free
 * before anything unacknowledged. Best effort. */
void wal__checkpoints_apply_all(wal_t *w);
/* Applies wal_topic_set_own_bound (writer thread): takes t's bytes out of
 * the total the first time, sets the bound and the REFUSE policy. */
void wal__own_bound_apply(wal_topic_t *t, uint64_t max_bytes);
/* Makes room for need more bytes in t under both bounds, as policy p says
 * (overflow.c; nothing is asked of it while both bounds have room).
 * Returns 0, WAL_NO_ROOM if p could not make enough, or -errno (an I/O
 * error: the topic's log is as before the failed step). */
int wal__make_room(wal_t *w, wal_topic_t *t, wal_overflow_t p, uint64_t need);
/* Deletes t's oldest sealed segment for a bound (t->nsegs > 1), counting
 * its unacknowledged records in dropped_total (persisted before the unlink)
 * with the rate-limited "dropping" warning. Returns 0 or -errno. */
int wal__drop_oldest_segment(wal_topic_t *t);
/* Of the topics inside the total bound (no own bound), the one whose
 * oldest sealed segment is the oldest (by creation time), or NULL when each
 * of them holds only its active segment. */
wal_topic_t *wal__oldest_sealed(wal_t *w);
/* Persists the requested checkpoint if due (or force) and deletes sealed
 * segments entirely at or below it. Returns 0 or -errno. */
int wal__checkpoint_apply(wal_topic_t *t, bool force);
/* *a = max(*a, v), atomically. */
static inline void wal__atomic_max(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load(a);
    while (cur < v && !atomic_compare_exchange_weak(a, &cur, v)) {
    }
}
/* The test-only step hook (wal_opts_t.step_hook; NULL in production). */
static inline void wal__step(wal_topic_t *t, wal_step_t step)
{
    if (t->w->o.step_hook)
        t->w->o.step_hook(t->w->o.step_arg, t, step);
}
/* Quarantines sealed segment base of t (reader found bad_offset corrupt). */
void wal__quarantine(wal_topic_t *t, uint64_t base, uint64_t bad_offset);
/* Renames segment <base>.seg aside as .corrupt (directory synced), counts it
 * in m->quarantined and adds its offsets in [max(first_bad, checkpoint + 1),
 * next_base) to m->dropped. Does not persist m; the caller does. */
int wal__quarantine_file(wal_topic_t *t, uint64_t base, uint64_t next_base, uint64_t first_bad,
                         wal_meta_t *m);

/* ---- reserve.c: the offset reservation ------------------------------------- */

/* Raises t's durable reservation if the declared end (res_used) came within
 * half a span of it: one meta write, t->reserved published after it
 * (writer thread). force: even while backing off after a failed write.
 * Returns 0 or the write's error (retried after retry_ms). */
int wal__reserve_apply(wal_topic_t *t, bool force);
/* At a clean close (writer thread): lowers the reservation to what is still
 * needed (0 when everything handed out is below the log's end). Returns 0
 * or the meta write's error (the reservation then stays as it was). */
int wal__reserve_release(wal_topic_t *t);
/* wal.c: queues a request and waits until the writer marks it done. */
int wal__request(wal_t *w, wal_req_t *req);
/* wal.c: queues a RESERVE request for t and waits for it. */
int wal__request_reserve(wal_topic_t *t, uint64_t end);

/* ---- memory.c: the memory tier -------------------------------------------- */

void wal__mem_init(wal_topic_t *t);
void wal__mem_destroy(wal_topic_t *t);
/* wal_submit's branch: holds b in memory when t is in MEMORY (or completes
 * it at once: empty, refused, reservation failed). false: t is not in
 * MEMORY, the caller enqueues b to the writer as usual. Loop thread. */
bool wal__mem_submit(wal_batch_t *b);
/* THE RELEASE RULE, in one place: the checkpoint moved to ck; every held
 * batch wholly at or below it leaves memory, in order, its completion
 * posted unless it was already (any thread: wal_checkpoint_ex). When more
 * outputs read a topic (issue 17), ck becomes their minimum here. */
void wal__mem_release(wal_topic_t *t, uint64_t ck);
/* T2 rule (d)'s sample: ms from a disk batch being readable to the checkpoint
 * passing it, the newest passed (UINT64_MAX: none since the last spill). */
uint64_t wal__mem_ack_latency(const wal_topic_t *t);
/* Reads the held record at off into cur->buf and fills *out. 0, WAL_END
 * (not held yet), or WAL_GAP with *gap_to: off was released (acknowledged
 * from memory), the held records start at *gap_to. Any thread. */
int wal__mem_read(wal_topic_t *t, uint64_t off, wal_mem_cursor_t *cur, wal_record_t *out, uint64_t *gap_to);
/* Writer thread, t synced and its reservation covering t->next: t enters
 * MEMORY, held offsets continuing at t->next. */
void wal__mem_enter(wal_topic_t *t, const wal_memory_opts_t *o);
/* wal_close (writer thread, stopping): t leaves MEMORY; what it holds and
 * did not complete completes with TB_ECLOSED, the rest is freed (after
 * the close's spill, nothing is left but what could not be written). */
void wal__mem_close(wal_topic_t *t);
/* The spill's two halves around the writer's write (writer.c, WAL_ITEM_SPILL):
 * wal__mem_snapshot copies what must be written (every held batch the
 * checkpoint has not passed; *n of them, malloc'd copies, oldest first)
 * and says where memory's offsets end (*end); wal__mem_spilled completes and
 * releases everything held (rc: the write's result) and leaves t DRAINING. */
wal_batch_t **wal__mem_snapshot(wal_topic_t *t, size_t *n /* OUT */, uint64_t *end /* OUT */);
void wal__mem_spilled(wal_topic_t *t, int rc, uint64_t written_end);
/* Housekeeping (writer): spills t if its oldest held batch waited
 * spill_after_ms; the deadline at which it would (UINT64_MAX: none). */
void wal__mem_due(wal_topic_t *t, uint64_t now_ms);
uint64_t wal__mem_deadline(wal_topic_t *t);
/* DRAINING -> READY (writer, housekeeping): when everything the log holds
 * is acknowledged, no batch of t is at the writer and the hold-down
 * passed, persists the checkpoint and the reservation in one meta write and
 * sets READY. Returns 0 or the write's error (t stays DRAINING). */
int wal__mem_drained(wal_topic_t *t, uint64_t now_ms);
/* The batch b leaves the writer (its completion is about to be posted). */
static inline void wal__wq_done(wal_batch_t *b)
{
    if (b->in_wq) {
        b->in_wq = false;
        atomic_fetch_sub(&b->t->wq, 1);
    }
}
/* Frees a batch whose last owner let go (refs). */
void wal__batch_unref(wal_batch_t *b);
/* Stores the log's readable end: disk_end, and the readable end as the
 * larger of it and the memory tier's end (monotonic once memory is used). */
void wal__publish_end(wal_topic_t *t, uint64_t disk_end);

/* ---- cursor.c: slots, cursors, OUTPUTS -------------------------------------- */

/* Recovery (first, not a repair): the slots from meta m (its table, or the
 * one default slot with the header's checkpoint), every one ACTIVE until
 * wal_cursors_settled, and ck_req their minimum. */
void wal__slots_load(wal_topic_t *t, const wal_meta_t *m);
/* Recovery moved the checkpoint over offsets with no record from from to
 * to: every slot at or above from moves to to, then the minimum. */
void wal__slots_raise(wal_topic_t *t, uint64_t from, uint64_t to);
/* Rebuilds m's slot table from the live slots (acct_mu held): ids, flags
 * and checkpoints live, dropped and dropped_age from m's entry of the same
 * id (the persisted ones, plus what the caller added). */
void wal__slots_fill_locked(wal_topic_t *t, wal_meta_t *m);
/* After a meta write of m returned: the slots' persisted drop counts. */
void wal__slots_persisted(wal_topic_t *t, const wal_meta_t *m);
/* Writer: whether a slot's checkpoint moved past what the meta file holds
 * over records on disk, or a slot is not in the file yet. */
bool wal__slots_dirty(wal_topic_t *t);
/* m's entry for id (the implied default slot of a version 1/2 m in *tmp), or NULL. */
const wal_meta_slot_t *wal__meta_slot(const wal_meta_t *m, uint16_t id, wal_meta_slot_t *tmp);
/* wal_open: reads <wal.dir>/OUTPUTS (absent: only "danube", id 0). */
int wal__outputs_load(wal_t *w);
void wal__outputs_free(wal_t *w);
/* Parses an OUTPUTS file of n bytes into names[1024] (strdup'd; names[0] is
 * "danube"). 0, or TB_ECORRUPT with *line the first bad line (names freed). */
int wal__outputs_parse(const char *buf, size_t n, char **names, size_t *line /* OUT */);
/* The name of output id in <dir>/OUTPUTS (malloc'd), or NULL (wal_check). */
char *wal__output_name(const char *dir, uint16_t id);
/* Whether name is an output name ([A-Za-z0-9_-]{1,64}): also the rule for state keys. */
bool wal__output_name_ok(const char *name);
/* Whether OUTPUTS names id in this open log. */
bool wal__output_known(wal_t *w, uint16_t id);

/* ---- state.c: output state blobs ------------------------------------------- */

/* Writer thread: WAL_ITEM_STATE (mkdirs, atomic replace). Returns 0 or -errno. */
int wal__state_apply(wal_t *w, const wal_req_t *req);
/* Removes <dir>/$outputs/<id>/ and what it holds (plain POSIX, offline:
 * wal_forget_output), printing what went to report (may be NULL). 0 when
 * there was nothing, or -errno. */
int wal__state_remove(const char *dir, uint16_t id, FILE *report);

/* ---- retired.c: the RETIRED file ------------------------------------------- */

/* Encodes v[0..n) (any order; written in name order) into *buf (malloc'd); returns its size. */
size_t wal__retired_encode(const wal_retired_t *v, size_t n, uint8_t **buf /* OUT */);
/* Decodes a whole RETIRED file of size bytes: 0 with *v (malloc'd, names
 * too: wal_retired_free) and *n, TB_EUNSUPPORTED or TB_ECORRUPT. */
int wal__retired_decode(const uint8_t *in, size_t size, wal_retired_t **v /* OUT */, size_t *n /* OUT */);
/* wal_open, before the topics: reads RETIRED (a damaged one is renamed
 * RETIRED.corrupt, logged, and taken as empty). 0 or -errno. */
int wal__retired_load(wal_t *w);
void wal__retired_free_all(wal_t *w);
/* wal_open's scan, for directory dir of topic name: true when it was a
 * removal interrupted, now finished (the caller skips it); a re-created
 * directory's stale entry is dropped (the file rewritten). */
bool wal__retired_recover(wal_t *w, const char *name, const char *dir);
/* The entry of name, or NULL ([W]). */
const wal_retired_t *wal__retired_find(wal_t *w, const char *name);
/* Writer: t was just created under the name of entry e (its directory exists,
 * empty): writes its meta from e. Returns 0 or -errno. */
int wal__retired_seed(wal_topic_t *t, const wal_retired_t *e);
/* Writer: drops the entry of name (the file rewritten). 0 or -errno. */
int wal__retired_drop(wal_t *w, const char *name);
/* Writer: WAL_ITEM_RETIRE. */
int wal__retire_apply(wal_t *w, wal_req_t *req);

/* ---- space.c: the free-space floor ---------------------------------------- */

/* Reads the free space now (statvfs through the io seam) and resolves the
 * floor; logs when the log goes below the floor or back above it. Writer
 * thread (or wal_open before it starts). */
void wal__space_refresh(wal_t *w);
/* Housekeeping: reads the free space when a reading is due. */
void wal__space_due(wal_t *w, uint64_t now_ms);
/* After segments were deleted: the next housekeeping reads the free space. */
void wal__space_soon(wal_t *w);
/* When the next periodic reading is due (UINT64_MAX: never: no statvfs). */
uint64_t wal__space_deadline(const wal_t *w);
/* The estimate of free bytes (UINT64_MAX while unknown). */
uint64_t wal__space_free(const wal_t *w);
/* Whether need more bytes leave the free space at or above the floor
 * (always, while it is off or unknown). */
bool wal__space_room(const wal_t *w, uint64_t need);

/* ---- overflow.c: the policies at a bound ------------------------------------ */

/* (a) Policy p's way to make room for need more bytes in t when a bound
 * would be passed (writer thread; called by wal__make_room). Returns 0,
 * WAL_NO_ROOM, or -errno. */
int wal__overflow_make_room(wal_t *w, wal_topic_t *t, wal_overflow_t p, uint64_t need);
/* (b) Policy p's refusal of a batch of t (of need bytes) it could not make
 * room for: logs (rate-limited, naming the bound) and returns the batch's
 * completion code. Writer thread. */
int wal__overflow_refuse(wal_t *w, wal_topic_t *t, wal_overflow_t p, uint64_t need);

/* ---- writer.c ------------------------------------------------------------- */

void *wal__writer_main(void *arg);
/* Queues an item and wakes the writer; returns TB_ECLOSED if stopping. */
int wal__enqueue(wal_t *w, wal_item_t *it);
/* Wakes the writer for housekeeping (checkpoint, retry). */
void wal__kick(wal_t *w);
/* Makes a new topic (directory, first segment) and registers it: writer thread. */
int wal__topic_create(wal_t *w, const char *name, wal_topic_t **out);
/* Publishes t's readable end according to the fsync mode. */
void wal__publish(wal_topic_t *t);
/* Writes a page of zeros past the active segment's end and cuts it again:
 * 0 if the disk takes a write, else the error (ENOSPC: full). */
int wal__probe_space(wal_topic_t *t);

#endif
