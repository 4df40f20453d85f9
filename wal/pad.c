/*
 * pad.c: whether a synced write ends on a page boundary (wal.fsync =
 * always), and where the boundaries are. The padding record itself is
 * specified in wal_format.h; writer.c writes it just before a round's
 * fdatasync.
 *
 * THE COST AVOIDED. fdatasync leaves the segment's last page clean but
 * partly filled. When the next round appends to it, the page goes from clean
 * to dirty again and is written again in full: Linux counts it once more in
 * the process's write_bytes and the card programs it once more. A round of
 * L bytes that starts inside a page dirties on average (L - 1) / A + 1 pages
 * (A the page size); one that starts on a boundary dirties ceil(L / A). A
 * padding record up to the boundary makes the next round start on a fresh
 * page.
 *
 * WHAT PADDING COSTS. No extra writing: it lies in the page the round has
 * just dirtied anyway, and goes out with the same fdatasync. It costs disk
 * space, A - f bytes (f: how full the last page is), which counts in the
 * bounds and so shortens the outage a topic can ride out.
 *
 * WHEN IT PAYS. Padding at fill f saves a page write only if the next round
 * would have crossed into the next page anyway (f + its length mod A > A);
 * a next round that fits in the rest of the page dirties one page either
 * way, the old one or a fresh one. If the next round's length modulo the
 * page is spread evenly, padding at fill f saves f bytes of writing on
 * average and costs A - f of disk: cheap when the page is nearly full,
 * poor when it is nearly empty. And the disk it costs is what a bounded log
 * rides an outage on. The rule:
 *
 *     pad when the padding is shorter than half the data this sync covers
 *     and shorter than half a page (A - f < min((wpos - spos) / 2, A / 2))
 *
 * Half a page keeps three quarters of the savings of padding every round
 * for a quarter of its disk. Half the data keeps small rounds from paying
 * for it: rounds of ~10 messages (devices that publish in step, one sync
 * per burst) padded under "shorter than the data" took 45% more disk, and
 * the disk-bound acceptance run (docs/GUARANTEES.md) kept 29% fewer
 * messages of its outage than before padding, to save a quarter of writes
 * that are 3-4x the data anyway (fewer syncs are the cure there, not the
 * layout). bench/sim_pad.py compares rules on the same page model (bytes
 * written / record bytes, then disk bytes / record bytes, 141-byte
 * records; the gateway's rounds vary, as with its default idle flush):
 *
 *   messages per round  no padding    pad always    pad < data    pad < min(data/2, A/2) (this)
 *   100, fixed          1.29 / 1.00   1.16 / 1.16   1.16 / 1.16   1.16 / 1.02
 *   ~77, exponential    1.38 / 1.00   1.21 / 1.20   1.22 / 1.15   1.26 / 1.04
 *   77 +- 10, normal    1.38 / 1.00   1.19 / 1.18   1.19 / 1.18   1.23 / 1.05
 *   1..150, uniform     1.38 / 1.00   1.20 / 1.19   1.21 / 1.17   1.25 / 1.04
 *   ~39, exponential    1.76 / 1.00   1.44 / 1.42   1.49 / 1.23   1.56 / 1.06
 *   ~20, exponential    2.51 / 1.00   1.96 / 1.94   2.10 / 1.29   2.23 / 1.07
 *   10, fixed           3.90 / 1.00   2.90 / 2.90   2.90 / 1.45   3.76 / 1.03
 *   3, fixed           10.68 / 1.00   9.68 / 9.68   9.68 / 1.08  10.19 / 1.02
 *   1, fixed           30.04 / 1.00  29.05 / 29.05 29.80 / 1.00  29.80 / 1.00
 *
 * At one message per sync nothing helps much: every sync writes a page
 * whatever the layout (docs/WAL.md).
 *
 * NEVER PADDED: a gap under 28 bytes (no room for a record head; the next
 * append shares that page); the last page of a segment (padding would fill
 * the segment and seal it early; unpadded, the next record either fits
 * there, one page written twice per segment, or starts the next segment,
 * and with 4 KiB test segments padding would mean a segment per sync); and
 * padding that would take the topic or the whole WAL past a bound (padding
 * is optional: it never deletes data to make room, so the bounds stay exact,
 * retention.c). INTERVAL and NEVER sync once per interval at most: one page
 * a second is not worth disk space, and they never pad.
 *
 * THE ALIGNMENT is the page size, the unit Linux dirties and counts, or
 * wal.dir's st_blksize when that is a larger power of two (a file system
 * with larger blocks rewrites a whole block for a partial one), up to
 * WAL_PAD_MAX (64 KiB): ZFS, for one, reports its 128 KiB record size, and
 * padding on average half of that per sync would cost more disk than the
 * page re-writes it saves.
 */
#include "wal/wal_int.h"

#include <sys/stat.h>
#include <unistd.h>

static bool pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

uint32_t wal__pad_align(const char *dir)
{
    long page = sysconf(_SC_PAGESIZE);
    uint32_t a = page > 0 && pow2((uint64_t)page) && (uint64_t)page <= WAL_PAD_MAX ? (uint32_t)page : 4096;
    struct stat st;
    if (stat(dir, &st) == 0 && st.st_blksize > 0 && (uint64_t)st.st_blksize > a &&
        (uint64_t)st.st_blksize <= WAL_PAD_MAX && pow2((uint64_t)st.st_blksize))
        a = (uint32_t)st.st_blksize;
    return a;
}

uint64_t wal__pad_len(uint64_t wpos, uint64_t spos, uint32_t align, uint64_t segment_bytes)
{
    if (align <= 1 || wpos <= spos)
        return 0;
    uint64_t fill = wpos % align;
    if (fill == 0)
        return 0;
    uint64_t pad = align - fill;
    if (pad < WAL_REC_HEAD || pad >= TB_MIN((wpos - spos) / 2, (uint64_t)align / 2) || wpos + pad >= segment_bytes)
        return 0;
    return pad;
}
