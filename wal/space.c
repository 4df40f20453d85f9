/*
 * space.c: the free-space floor (wal.min_free_bytes). The log's file system
 * is often shared (an SD card with the OS and other programs): below a
 * floor of free space the log behaves as at max_total_bytes, and it
 * recovers on its own when space returns.
 *
 * The writer keeps an estimate of the free bytes: a statvfs reading
 * (through the io seam, so tests fake it) at open, every space_check_ms in
 * housekeeping, after it deleted segments, after a write failed for want
 * of space and at wal_sync; in between, the last reading less what the log
 * grew by since. Every change of a topic's bytes goes through
 * wal__topic_bytes_set, which keeps all_bytes, so the estimate follows
 * appends, rotations, cuts and deletions without a system call. A
 * deletion counts as freed at once; if a reader still has the segment open
 * its blocks return only when the reader leaves it, which the next reading
 * shows, so at most one segment per reader is deleted more than needed.
 * Meta files and directories are not in all_bytes: a few hundred bytes the
 * next reading corrects.
 *
 * The floor is the larger of min_free_bytes and min_free_permille of the
 * file system's size (f_blocks), compared with f_bavail, what an
 * unprivileged process may still write (so it sits on top of ext4's root
 * reserve). 0 and 0, or a file system statvfs cannot read, turn it off.
 * wal__room (retention.c) asks wal__space_room for topics inside the total
 * bound; a topic with an own bound (the session journal) is exempt, so
 * persistent sessions keep working while data topics are held to the floor.
 * What a topic does at the floor is its overflow policy's (overflow.c), as
 * at the total bound.
 */
#include "wal/wal_int.h"

#include <string.h>

static uint64_t floor_of(const wal_opts_t *o, uint64_t total)
{
    uint64_t pct = o->min_free_permille ? (uint64_t)((unsigned __int128)total * o->min_free_permille / 1000) : 0;
    return TB_MAX(o->min_free_bytes, pct);
}

uint64_t wal__space_free(const wal_t *w)
{
    wal_t *m = (wal_t *)w;
    if (!atomic_load(&m->sp_known))
        return UINT64_MAX;
    uint64_t avail = atomic_load(&m->sp_avail), base = atomic_load(&m->sp_base), all = atomic_load(&m->all_bytes);
    if (all >= base)
        return avail > all - base ? avail - (all - base) : 0;
    return avail + (base - all);
}

bool wal__space_room(const wal_t *w, uint64_t need)
{
    uint64_t floor = atomic_load(&((wal_t *)w)->sp_floor);
    if (floor == 0)
        return true;
    uint64_t free = wal__space_free(w);
    return free == UINT64_MAX || (free >= need && free - need >= floor);
}

void wal__space_refresh(wal_t *w)
{
    const wal_io_t *io = w->io;
    w->sp_next_ms = tb_mono_ms() + w->o.space_check_ms;
    if (!io->statvfs)
        return;
    uint64_t avail = 0, total = 0;
    int rc = io->statvfs(io->ctx, w->dir, &avail, &total);
    uint64_t suppressed;
    if (rc < 0) {
        if (tb_ratelimit(&w->sp_err_rl, &suppressed))
            tb_warn("wal: cannot read the free space of the log's file system; the floor (wal.min_free_bytes) "
                    "uses the last reading", TB_S("dir", w->dir), TB_ERR(rc), TB_U("suppressed", suppressed));
        return;
    }
    uint64_t floor = floor_of(&w->o, total);
    atomic_store(&w->sp_base, atomic_load(&w->all_bytes));
    atomic_store(&w->sp_avail, avail);
    atomic_store(&w->sp_total, total);
    atomic_store(&w->sp_floor, floor);
    atomic_store(&w->sp_known, true);
    atomic_fetch_add(&w->sp_readings, 1);
    bool below = floor > 0 && avail < floor;
    if (below == w->sp_short)
        return;
    w->sp_short = below;
    /* each crossing below is logged at most once a minute, and the way back
     * above after each one that was, so the last line never lies */
    if (below && tb_ratelimit(&w->sp_rl, &suppressed)) {
        w->sp_short_logged = true;
        tb_warn("wal: free space below wal.min_free_bytes: the log behaves as full (as at max_total_bytes) until "
                "space returns",
                TB_S("dir", w->dir), TB_U("free_bytes", avail), TB_U("min_free_bytes", floor),
                TB_U("fs_bytes", total), TB_U("log_bytes", atomic_load(&w->all_bytes)),
                TB_U("suppressed", suppressed));
    } else if (!below && w->sp_short_logged) {
        w->sp_short_logged = false;
        tb_info("wal: free space above wal.min_free_bytes again", TB_S("dir", w->dir), TB_U("free_bytes", avail),
                TB_U("min_free_bytes", floor));
    }
}

void wal__space_due(wal_t *w, uint64_t now_ms)
{
    if (w->io->statvfs && now_ms >= w->sp_next_ms)
        wal__space_refresh(w);
}

void wal__space_soon(wal_t *w)
{
    w->sp_next_ms = 0;
}

uint64_t wal__space_deadline(const wal_t *w)
{
    return w->io->statvfs ? w->sp_next_ms : UINT64_MAX;
}

void wal_space(wal_t *w, wal_space_t *out)
{
    memset(out, 0, sizeof *out);
    out->known = atomic_load(&w->sp_known);
    out->readings = atomic_load(&w->sp_readings);
    if (!out->known)
        return;
    out->free_bytes = wal__space_free(w);
    out->fs_bytes = atomic_load(&w->sp_total);
    out->min_free_bytes = atomic_load(&w->sp_floor);
}
