/*
 * reader.c: reading a topic back (the replicator's thread), concurrently
 * with the writer, through the reader's own file descriptor.
 *
 * DESIGN. A reader holds one segment open and a buffer filled with large
 * preads: 16 KiB while it follows the live end, doubled up to 256 KiB each
 * time a pread fills it whole (a backlog), halved back after 16 WAL_ENDs in a
 * row, so several readers per topic (one per output) stay cheap; records are decoded (CRC checked) in place and returned as
 * views into the buffer, so replay costs one memcpy-free decode per record.
 * 256 KiB replays as fast as 1 MiB here (19.3 vs 20.6 million records/s)
 * and keeps a reader per topic affordable on a Raspberry Pi.
 *
 * It only ever looks for offsets below the topic's readable end (one
 * acquire load), which the writer publishes after the bytes are written (and
 * synced, unless fsync=never). A buffer may still hold bytes read before the
 * writer finished them: whenever a record does not decode, the reader reads
 * again from that record's position before drawing any conclusion.
 *
 * Rotation and retention never pull the floor from under a reader: an open
 * descriptor keeps a deleted segment readable, and at a segment's end the
 * reader looks the next offset up again in the topic's segment list. If
 * that offset is gone (a bound deleted it, or a segment was quarantined) it
 * jumps to the oldest offset that exists and returns WAL_GAP once, with the
 * range. A gap is a drop (counted in dropped_total) or a hole (offsets that
 * never held a record: a reservation skipped at recovery, a quarantined
 * active segment's, acknowledged ones): classify() tells them apart by where
 * the gap was met and what the topic knows of its holes and quarantines. Records a bound deleted and counted as dropped are never returned,
 * even from the segment the reader still has open (the topic's read_floor,
 * checked before every record): a record delivered and also counted would
 * make dropped_total overstate the loss and the topic's queued count go
 * below zero. A retention delete (everything in it acknowledged) keeps
 * the open segment readable.
 * The reader buffers past the readable end; when the writer cuts unsynced
 * records (a failed write or fdatasync) their offsets are written again with
 * other messages, so a change of the topic's cut_gen drops the buffer before
 * a record is trusted from it.
 * Past the log's readable end (disk_end) the records, if any, are held in
 * memory (memory.c): the reader copies each one into its own buffer under
 * the tier's lock, so a record returned stays valid until the next call
 * whatever the tier releases meanwhile. Offsets there below what memory
 * holds were acknowledged from memory: a hole (WAL_GAP).
 * A record that fails its CRC below the readable end in a sealed segment is
 * corruption: the reader asks the writer to quarantine the
 * segment and skips to the next one (WAL_GAP). In the active segment it
 * returns TB_ECORRUPT.
 */
#include "wal/wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#define RD_BUF (256u << 10)      /* the most a backlog gets */
#define RD_BUF_MIN (16u << 10)   /* what a live reader keeps (several outputs per topic) */
#define RD_SHRINK_ENDS 16u       /* consecutive WAL_ENDs that halve the buffer */

struct wal_reader {
    wal_topic_t *t;
    const wal_io_t *io;
    int fd;               /* current segment, -1 if none */
    uint64_t seg_base;
    uint32_t seed;
    uint16_t version;     /* the segment's format version: the rule differs for padding */
    uint64_t newer_base;  /* base of the next segment when we opened this one, 0 if none */
    uint8_t *buf;
    size_t cap, len, off; /* buf[0] is at file position buf_fpos; off: next record */
    size_t want;          /* the adaptive size: doubled when a refill fills the buffer
                           * (a backlog), halved after RD_SHRINK_ENDS WAL_ENDs in a row */
    unsigned ends;
    uint64_t buf_fpos;
    uint64_t next;        /* offset of the record at buf[off] */
    uint64_t gap_from, gap_to, skipped;
    wal_gap_kind_t gap_kind;
    uint64_t cut_gen;     /* the topic's cut_gen when buf was last known good */
    wal_mem_cursor_t mem; /* reading held records (memory.c) */
};

static void close_seg(wal_reader_t *r)
{
    if (r->fd >= 0)
        r->io->close(r->io->ctx, r->fd);
    r->fd = -1;
    r->len = r->off = 0;
}

/* How a gap came about, as far as the reader can tell where it met it
 * (wal_reader_gap_kind has the two kinds). */
enum {
    GAP_DROP,    /* the read floor, or a segment the reader found corrupt: counted as dropped */
    GAP_BELOW,   /* below the oldest segment: a bound (dropped), retention or a hole */
    GAP_BETWEEN, /* a segment's records end before the next one's base: a hole, or a
                    quarantined sealed segment (dropped) */
    GAP_RELEASED, /* past the log, below what memory holds: acknowledged from memory */
};

/* Whether every offset of [from, to) is acknowledged or in the hole
 * recovery left for the reservation: nothing of it was lost. */
static bool nothing_lost(const wal_topic_t *t, uint64_t from, uint64_t to)
{
    uint64_t lo = TB_MAX(from, wal_topic_checkpoint(t) + 1);
    if (lo >= to)
        return true;
    uint64_t hf = atomic_load(&((wal_topic_t *)t)->hole_from), ht = atomic_load(&((wal_topic_t *)t)->hole_to);
    return ht > hf && lo >= hf && to <= ht;
}

static wal_gap_kind_t classify(const wal_topic_t *t, int where, uint64_t from, uint64_t to)
{
    switch (where) {
    case GAP_BELOW:
        return nothing_lost(t, from, to) ? WAL_GAP_HOLE : WAL_GAP_DROPPED;
    case GAP_RELEASED:
        return WAL_GAP_HOLE;
    case GAP_BETWEEN: {
        uint64_t qhi = atomic_load(&((wal_topic_t *)t)->q_hi), qlo = atomic_load(&((wal_topic_t *)t)->q_lo);
        bool quarantined = qhi > 0 && from < qhi && to > qlo;
        return quarantined && !nothing_lost(t, from, to) ? WAL_GAP_DROPPED : WAL_GAP_HOLE;
    }
    default:
        return WAL_GAP_DROPPED;
    }
}

static int gap(wal_reader_t *r, int where, uint64_t from, uint64_t to)
{
    close_seg(r);
    r->gap_from = from;
    r->gap_to = to;
    r->gap_kind = classify(r->t, where, from, to);
    r->skipped += to - from;
    r->next = to;
    return WAL_GAP;
}

static void ask_quarantine(wal_reader_t *r, uint64_t bad_offset)
{
    wal_req_t *req = tb_calloc(1, sizeof *req);
    req->item.kind = WAL_ITEM_QUARANTINE;
    req->topic = r->t;
    req->base = r->seg_base;
    req->bad_offset = bad_offset;
    tb_warn("wal: reader found a corrupt sealed segment", TB_S("topic", r->t->name), TB_U("segment", r->seg_base),
            TB_U("offset", bad_offset));
    if (wal__enqueue(r->t->w, &req->item) < 0)
        free(req);
}

/* Reads afresh from the current record position. Returns bytes now
 * available after it (0 at end of file) or -errno. */
static ssize_t refill(wal_reader_t *r, size_t need)
{
    r->buf_fpos += r->off;
    r->len = r->off = 0;
    if (r->cap < r->want) { /* the buffer was filled whole last time: grow (empty now, no copy) */
        free(r->buf);
        r->buf = tb_malloc(r->want);
        r->cap = r->want;
    }
    if (need > r->cap) {
        uint64_t size;
        int rc = r->io->fsize(r->io->ctx, r->fd, &size);
        if (rc < 0)
            return rc;
        if (r->buf_fpos + need > size)
            need = 0; /* cannot be whole: do not allocate for it */
        if (need > r->cap) {
            r->buf = tb_realloc(r->buf, need);
            r->cap = need;
        }
    }
    ssize_t n = wal__pread_full(r->io, r->fd, r->buf, r->cap, r->buf_fpos);
    if (n < 0)
        return n;
    r->len = (size_t)n;
    if ((size_t)n == r->cap && r->want < RD_BUF)
        r->want = TB_MIN((size_t)RD_BUF, r->want * 2);
    return n;
}

/* Caught up (WAL_END): after RD_SHRINK_ENDS of them in a row, half the
 * buffer goes (its bytes past the position are dropped: read again later). */
static void maybe_shrink(wal_reader_t *r)
{
    if (++r->ends < RD_SHRINK_ENDS || r->want <= RD_BUF_MIN)
        return;
    r->ends = 0;
    r->want /= 2;
    if (r->cap > r->want) {
        r->buf_fpos += r->off;
        r->len = r->off = 0;
        free(r->buf);
        r->buf = tb_malloc(r->want);
        r->cap = r->want;
    }
}

/* Decodes the record at the current position (expected offset r->next). */
static int decode(wal_reader_t *r, wal_rec_t *rec)
{
    return wal__rec_decode(r->buf + r->off, r->len - r->off, UINT64_MAX, r->seed, r->version, r->next, rec);
}

/*
 * The next message record from the current position: steps over padding,
 * and reads afresh from the position once before saying a record does not
 * decode. Returns WAL_REC_OK (*rec filled, the position at it), another
 * WAL_REC_* (*n: bytes found at the position by that read, 0 at end of
 * file), or -errno. Only called for a record below the readable end, so any
 * padding before it was synced with the records before it (wal_format.h)
 * and stays where it is.
 */
static int decode_next(wal_reader_t *r, wal_rec_t *rec, ssize_t *n)
{
    bool fresh = false;
    for (;;) {
        int d = decode(r, rec);
        if (d == WAL_REC_PAD) {
            r->off += rec->len;
            fresh = false; /* what follows may run past the buffer */
            continue;
        }
        if (d == WAL_REC_OK || fresh)
            return d;
        size_t need = TB_MAX((size_t)WAL_REC_HEAD, (size_t)wal__rec_len(r->buf + r->off, r->len - r->off));
        if ((*n = refill(r, need)) < 0)
            return (int)*n;
        fresh = true;
    }
}

/* After a record: steps over padding that follows it in the buffer, so
 * wal_reader_pos names where the next record starts. The padding after a
 * record was written and synced with it, so this is safe before the next
 * record is readable; padding not wholly in the buffer waits for the next
 * call (until then wal_topic_bytes_after counts it). */
static void skip_padding(wal_reader_t *r, bool may_read)
{
    if (r->version < 2)
        return; /* no padding in version 1 */
    bool fresh = false;
    for (;;) {
        wal_rec_t pad;
        int d = decode(r, &pad);
        if (d == WAL_REC_PAD) {
            r->off += pad.len;
            fresh = false;
            continue;
        }
        /* padding not (wholly) in the buffer: read once more from here
         * (only between calls: the record returned last is a view into the
         * buffer). The buffer may have been filled between the round's
         * records and its padding; a caught-up reader would otherwise stop
         * in front of it and wal_topic_bytes_after would report it as lag. */
        if (d != WAL_REC_SHORT || fresh || !may_read)
            return; /* !may_read: a read would overwrite the record just returned */
        size_t need = TB_MAX((size_t)WAL_REC_HEAD, (size_t)wal__rec_len(r->buf + r->off, r->len - r->off));
        if (refill(r, need) <= 0)
            return;
        fresh = true;
    }
}

/* Opens the segment that holds offset want and positions at it. Returns 0,
 * WAL_GAP, WAL_END or an error. */
static int locate(wal_reader_t *r, uint64_t want)
{
    wal_topic_t *t = r->t;
    for (int tries = 0; tries < 4; tries++) {
        close_seg(r);
        pthread_mutex_lock(&t->mu);
        if (t->nsegs == 0) {
            pthread_mutex_unlock(&t->mu);
            return WAL_END;
        }
        if (want < t->segs[0].base) {
            uint64_t to = t->segs[0].base;
            pthread_mutex_unlock(&t->mu);
            return gap(r, GAP_BELOW, want, to);
        }
        size_t i = t->nsegs - 1;
        while (t->segs[i].base > want)
            i--;
        r->seg_base = t->segs[i].base;
        r->newer_base = i + 1 < t->nsegs ? t->segs[i + 1].base : 0;
        pthread_mutex_unlock(&t->mu);

        char *path = wal__seg_path(t, r->seg_base, NULL);
        r->fd = r->io->open(r->io->ctx, path, O_RDONLY, 0);
        free(path);
        if (r->fd == -ENOENT)
            continue; /* deleted or quarantined since we looked: look again */
        if (r->fd < 0) {
            int rc = r->fd;
            r->fd = -1;
            return rc;
        }
        r->buf_fpos = 0;
        ssize_t n = refill(r, WAL_SEG_HDR_SIZE);
        if (n < 0)
            return (int)n;
        wal_seghdr_t h;
        int hrc = (size_t)n < WAL_SEG_HDR_SIZE ? TB_ECORRUPT : wal__seghdr_decode(r->buf, &h);
        if (hrc == 0 && h.base != r->seg_base)
            hrc = TB_ECORRUPT;
        if (hrc != 0) {
            if (!r->newer_base)
                return TB_ECORRUPT;
            ask_quarantine(r, r->seg_base);
            return gap(r, GAP_DROP, want, r->newer_base);
        }
        r->seed = h.seed;
        r->version = h.version;
        r->off = WAL_SEG_HDR_SIZE;
        r->next = r->seg_base;
        /* walk to want (no index: a seek inside a segment is a scan) */
        while (r->next < want) {
            wal_rec_t rec;
            int d = decode_next(r, &rec, &n);
            if (d < 0)
                return d;
            if (d == WAL_REC_OK) {
                r->off += rec.len;
                r->next++;
                continue;
            }
            /* the segment's records end (or break) before want */
            if (!r->newer_base)
                return n == 0 ? WAL_END : TB_ECORRUPT;
            if (n != 0) {
                ask_quarantine(r, r->next);
                return gap(r, GAP_DROP, want, r->newer_base);
            }
            return gap(r, GAP_BETWEEN, want, r->newer_base);
        }
        return 0;
    }
    return -ENOENT;
}

/* Past the log's readable end: the memory tier's held records. */
static int next_from_memory(wal_reader_t *r, wal_record_t *out)
{
    if (r->fd >= 0)
        close_seg(r); /* the disk position no longer follows r->next: look it up again later */
    uint64_t to = 0;
    int rc = wal__mem_read(r->t, r->next, &r->mem, out, &to);
    if (rc == WAL_GAP)
        return gap(r, GAP_RELEASED, r->next, to);
    if (rc == 0)
        r->next++;
    return rc;
}

int wal_reader_next(wal_reader_t *r, wal_record_t *out)
{
    for (int tries = 0; tries < 4; tries++) {
        uint64_t end = wal_topic_readable_end(r->t);
        if (r->next >= end) {
            if (r->fd >= 0)
                skip_padding(r, true); /* caught up: wal_reader_pos past any padding */
            maybe_shrink(r);
            return WAL_END;
        }
        /* after readable_end (acquire), which is published after disk_end */
        if (r->next >= atomic_load_explicit(&r->t->disk_end, memory_order_acquire))
            return next_from_memory(r, out);
        /* after readable_end (acquire): a cut that preceded the records now
         * readable is seen here, and what the buffer held past the synced
         * end then (the cut records, whose offsets were reused) is dropped */
        uint64_t gen = atomic_load_explicit(&r->t->cut_gen, memory_order_acquire);
        if (gen != r->cut_gen) {
            r->cut_gen = gen;
            r->buf_fpos += r->off;
            r->len = r->off = 0;
        }
        uint64_t floor = atomic_load_explicit(&r->t->read_floor, memory_order_acquire);
        if (r->next < floor)
            return gap(r, GAP_DROP, r->next, floor);
        if (r->fd < 0) {
            int rc = locate(r, r->next);
            if (rc != 0)
                return rc;
        }
        wal_rec_t rec;
        ssize_t n = 0;
        int d = decode_next(r, &rec, &n);
        if (d < 0)
            return d;
        if (d != WAL_REC_OK) {
            if (n == 0) {
                /* clean end of this segment: the record is in a newer one,
                 * or the newer one starts later (an offset hole left by a
                 * quarantined active segment: reported as a gap) */
                if (r->newer_base && r->next < r->newer_base)
                    return gap(r, GAP_BETWEEN, r->next, r->newer_base);
                if (!r->newer_base && tries > 0)
                    return WAL_END; /* looked again: still the newest segment */
                close_seg(r);
                continue;
            }
            if (!r->newer_base) {
                /* the newest data fails its check: maybe a newer segment
                 * appeared since we opened this one; look again once */
                if (tries == 0) {
                    close_seg(r);
                    continue;
                }
                return TB_ECORRUPT;
            }
            ask_quarantine(r, r->next);
            return gap(r, GAP_DROP, r->next, r->newer_base);
        }
        wal__rec_view(&rec, r->buf + r->off, out);
        r->off += rec.len;
        r->next++;
        r->ends = 0;
        skip_padding(r, false);
        return 0;
    }
    return TB_ECORRUPT;
}

int wal_reader_open(wal_topic_t *t, uint64_t from_offset, wal_reader_t **out)
{
    wal_reader_t *r = tb_calloc(1, sizeof *r);
    r->t = t;
    r->io = t->w->io;
    r->fd = -1;
    r->cap = r->want = RD_BUF_MIN;
    r->buf = tb_malloc(r->cap);
    r->next = from_offset ? from_offset : 1;
    r->cut_gen = atomic_load_explicit(&t->cut_gen, memory_order_acquire);
    *out = r;
    return 0;
}

int wal_reader_seek(wal_reader_t *r, uint64_t offset)
{
    close_seg(r);
    r->next = offset ? offset : 1;
    return 0;
}

uint64_t wal_reader_offset(const wal_reader_t *r)
{
    return r->next;
}

void wal_reader_pos(const wal_reader_t *r, wal_pos_t *out)
{
    out->offset = r->next;
    out->exact = r->fd >= 0;
    out->seg_base = out->exact ? r->seg_base : 0;
    out->byte = out->exact ? r->buf_fpos + r->off : 0;
}

uint64_t wal_reader_gap(const wal_reader_t *r, uint64_t *from, uint64_t *to)
{
    if (from)
        *from = r->gap_from;
    if (to)
        *to = r->gap_to;
    return r->skipped;
}

wal_gap_kind_t wal_reader_gap_kind(const wal_reader_t *r)
{
    return r->gap_kind;
}

void wal_reader_close(wal_reader_t *r)
{
    if (!r)
        return;
    close_seg(r);
    free(r->mem.buf);
    free(r->buf);
    free(r);
}

size_t wal_reader_buffer(const wal_reader_t *r)
{
    return r->cap;
}
