/* fuzz-lib: tb_wal */
/*
 * fuzz_wal_recovery.c: recovery must survive any segment file.
 *
 * Input: byte 0 is a mode, the rest is the bytes of one segment file,
 * after the topic's meta file when bit 4 says so.
 *   bit 0  the file is sealed: a valid empty segment follows it
 *   bit 1  verify_on_open (sealed segments are CRC-checked at open)
 *   bit 2  fix the header CRC, so the fuzzer gets past it
 *   bit 3  fix every record CRC along the length chain, so it explores the
 *          layout checks behind the checksum
 *   bit 4  a meta file comes first: byte 1 is its length L, the next L
 *          bytes are the file (wal_format.h "META FILE")
 *   bit 5  fix the meta file's framing: its size field set to L and its
 *          CRC (the last 4 bytes) recomputed, so the fuzzer reaches the
 *          version and the fields
 * The segment file is named after the base offset in its header (bytes 8..15).
 *
 * Checked, for every input: recovery never crashes (ASan/UBSan); every
 * record a reader returns passes an independent bitwise CRC32C with the
 * file's salt, and offsets only go up; the recovered log accepts a batch,
 * at an offset above everything read, and returns it intact. When the meta
 * file is valid (decoded here independently of the library), the topic
 * shows its counters and the batch's offset is above its checkpoint and at
 * or above its floor and its reservation. After a clean close the meta
 * file holds no reservation (nothing was handed out beyond the log) and
 * the log reopens exactly after that batch: no jump, nothing reused.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wal/wal.h"

#include "wal_fuzz.h"

#define HDR 32u
/* which check failed, on stderr, then abort (libFuzzer keeps the input) */
#define FAIL(why) (fprintf(stderr, "fuzz_wal_recovery: %s (line %d)\n", why, __LINE__), abort())

static uint32_t ld32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t ld64(const uint8_t *p) { return ld32(p) | (uint64_t)ld32(p + 4) << 32; }
static void st32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void st64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

static int nosync(void *ctx, int fd) { return 0; }
static int nosync_dir(void *ctx, const char *path) { return 0; }
static int plain_write_atomic(void *ctx, const char *path, const void *data, size_t len)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, data, len);
    close(fd);
    if (w != (ssize_t)len)
        return -EIO;
    return rename(tmp, path) < 0 ? -errno : 0;
}

static wal_io_t io;


static void init_once(void)
{
    if (!fz_scratch_init("fuzzwal"))
        return;
    io = *wal_io_posix();
    io.fdatasync = nosync;
    io.fsync_dir = nosync_dir;
    io.write_atomic = plain_write_atomic;
}

/* The meta file as wal_format.h specifies it, decoded without the library. */
typedef struct meta {
    bool valid;
    unsigned version;
    uint64_t floor, checkpoint, dropped, quarantined, lost, reserved, dropped_age;
    unsigned nslots;   /* version 3: the slot table */
    uint64_t slot_min; /* the lowest slot checkpoint (version 3 with slots), else checkpoint */
} meta_t;

static meta_t meta_parse(const uint8_t *p, size_t n)
{
    meta_t m = { 0 };
    if (n < 12 || memcmp(p, "TBWM", 4) != 0 || (p[6] | p[7] << 8) != (int)n || ld32(p + n - 4) != fz_crc32c(0, p, n - 4))
        return m;
    m.version = (unsigned)(p[4] | p[5] << 8);
    unsigned ns = n >= 84 ? (unsigned)(p[64] | p[65] << 8) : 0;
    if (!((m.version == 1 && n == 64) || (m.version == 2 && n == 80) || (m.version == 3 && ns <= 32 && n == 84 + 32 * ns)))
        return m;
    m.floor = ld64(p + 8);
    m.checkpoint = ld64(p + 16);
    m.dropped = ld64(p + 24);
    m.quarantined = ld64(p + 32);
    m.lost = ld64(p + 40);
    if (m.version >= 2) {
        m.reserved = ld64(p + 48);
        m.dropped_age = ld64(p + 56);
    }
    m.valid = m.floor <= (1ull << 62) && m.checkpoint <= (1ull << 62) && m.reserved <= (1ull << 62);
    m.slot_min = m.checkpoint;
    if (m.version == 3) {
        m.nslots = ns;
        uint64_t min = UINT64_MAX;
        for (unsigned i = 0; i < ns; i++) {
            const uint8_t *sl = p + 80 + 32 * i;
            uint64_t ck = ld64(sl + 8);
            m.valid = m.valid && ck <= (1ull << 62);
            for (unsigned j = 0; j < i; j++)
                m.valid = m.valid && (sl[0] | sl[1] << 8) != (p[80 + 32 * j] | p[81 + 32 * j] << 8);
            min = ck < min ? ck : min;
        }
        if (ns > 0)
            m.slot_min = min; /* recovery waits for every persisted slot until settled */
    }
    return m;
}

static meta_t meta_file(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/meta", dir);
    uint8_t buf[4097];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    return meta_parse(buf, n);
}

/* Applies the CRC fix-ups of mode bits 2 and 3 in place. */
static void fixups(uint8_t *seg, size_t n, uint8_t mode)
{
    if (n < HDR)
        return;
    if (ld64(seg + 8) > (1ull << 62))
        st64(seg + 8, ld64(seg + 8) & ((1ull << 62) - 1)); /* keep offsets far from wrapping */
    if (mode & 4)
        st32(seg + 28, fz_crc32c(0, seg, 28));
    if (mode & 8) {
        uint32_t seed = fz_crc32c(0, seg + 24, 4);
        size_t pos = HDR;
        while (pos + 28 <= n) {
            uint32_t len = ld32(seg + pos);
            if (len < 28 || len > n - pos)
                break;
            st32(seg + pos + 4, fz_crc32c(seed, seg + pos + 8, len - 8));
            pos += len;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    init_once();
    uint8_t mode = data[0];
    const uint8_t *in = data + 1;
    size_t n = size - 1, meta_len = 0;
    uint8_t meta_buf[256];
    if (mode & 16) {
        meta_len = n ? TB_MIN((size_t)in[0], n - 1) : 0;
        memcpy(meta_buf, in + 1, meta_len);
        in += n ? 1 + meta_len : 0;
        n -= n ? 1 + meta_len : 0;
        if ((mode & 32) && meta_len >= 12) {
            meta_buf[6] = (uint8_t)meta_len;
            meta_buf[7] = 0;
            st32(meta_buf + meta_len - 4, fz_crc32c(0, meta_buf, meta_len - 4));
        }
    }
    meta_t meta = meta_parse(meta_buf, meta_len);
    uint8_t *seg = malloc(n ? n : 1);
    memcpy(seg, in, n);
    fixups(seg, n, mode);
    uint64_t base = n >= 16 ? ld64(seg + 8) : 1;
    if (base == 0 || base > (1ull << 62))
        base = 1;
    uint32_t salt_seed = n >= HDR ? fz_crc32c(0, seg + 24, 4) : 0;

    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/wal/+f+t", fz_root);
    snprintf(path, sizeof path, "%s/wal", fz_root);
    mkdir(path, 0755);
    mkdir(dir, 0755);
    if (mode & 16) {
        snprintf(path, sizeof path, "%s/meta", dir);
        fz_write_file(path, meta_buf, meta_len);
    }
    snprintf(path, sizeof path, "%s/%020llu.seg", dir, (unsigned long long)base);
    fz_write_file(path, seg, n);
    if (mode & 1) {
        /* a valid empty segment after it, so the fuzzed one is sealed */
        uint8_t h[HDR] = { 'T', 'B', 'W', 'L', 1, 0, HDR, 0 };
        uint64_t next = base + 1 + n / 28;
        st64(h + 8, next);
        st32(h + 28, fz_crc32c(0, h, 28));
        snprintf(path, sizeof path, "%s/%020llu.seg", dir, (unsigned long long)next);
        fz_write_file(path, h, HDR);
    }

    wal_opts_t o;
    wal_opts_default(&o);
    snprintf(path, sizeof path, "%s/wal", fz_root);
    o.dir = path;
    o.segment_bytes = 1 << 20;
    o.io = &io;
    o.verify_on_open = (mode & 2) != 0;
    wal_t *w;
    if (wal_open(&o, &w) != 0)
        FAIL("wal_open refused bad data");
    wal_topic_t *t = wal_topic_find(w, "/f/t");
    if (!t)
        FAIL("topic not recovered");
    wal_topic_stats_t st;
    wal_topic_stats(t, &st);
    if (meta.valid) {
        if (st.reserved != meta.reserved || st.dropped_age_total != meta.dropped_age || st.lost_total < meta.lost ||
            st.dropped_total < meta.dropped || st.quarantined_segments < meta.quarantined)
            FAIL("the topic does not show the meta file's counters");
        if (st.checkpoint < meta.slot_min || st.next_offset <= meta.checkpoint || st.next_offset < meta.floor ||
            st.next_offset < meta.reserved)
            FAIL("offsets continue below what the meta file says");
    }

    /* every record returned passes an independent CRC with the file's salt */
    wal_reader_t *r;
    wal_reader_open(t, 1, &r);
    uint64_t last = 0, nread = 0;
    for (int i = 0; i < 100000; i++) {
        wal_record_t rec;
        int rc = wal_reader_next(r, &rec);
        if (rc == WAL_GAP)
            continue;
        if (rc == WAL_END)
            break;
        if (rc != 0) {
            fprintf(stderr, "reader: %s at offset %llu\n", tb_strerror(rc), (unsigned long long)wal_reader_offset(r));
            FAIL("recovery left something a reader cannot read");
        }
        if (rec.offset <= last || rec.raw_len < 28 || ld32(rec.raw) != rec.raw_len ||
            ld32(rec.raw + 4) != fz_crc32c(salt_seed, rec.raw + 8, rec.raw_len - 8) || rec.payload_len > rec.raw_len)
            FAIL("a returned record fails its CRC or order");
        last = rec.offset;
        nread++;
    }
    /* the backlog in records (segment ends from each sealed segment's last
     * record, or the full scan): never more than the offsets; exact once
     * every sealed segment was verified at open */
    uint64_t end = wal_topic_readable_end(t), stored = wal_topic_stored_between(t, 0, end);
    if (stored > end - 1 || (o.verify_on_open && stored != nread)) {
        fprintf(stderr, "stored %llu, read %llu, end %llu\n", (unsigned long long)stored, (unsigned long long)nread,
                (unsigned long long)end);
        FAIL("the records counted are not the records stored");
    }

    /* the recovered log takes a batch above everything read, and gives it back */
    wal_batch_t *b = wal_batch_new(t);
    wal_msg_t m = { .payload = (const uint8_t *)"after", .payload_len = 5, .mqtt_topic = "x", .mqtt_topic_len = 1 };
    if (wal_batch_add(b, &m) != 0)
        FAIL("batch_add");
    wal_submit(b, NULL);
    if (wal_sync(w) != 0)
        FAIL("sync after recovery");
    wal_batch_t *done = wal_take_done(w);
    if (!done || wal_batch_next(done) || wal_batch_completion(done)->rc != 0)
        FAIL("append after recovery failed");
    uint64_t off = wal_batch_completion(done)->first_offset;
    wal_batch_free(done);
    if (off <= last || off < st.next_offset)
        FAIL("offset went backwards");
    wal_reader_seek(r, off);
    wal_record_t rec;
    if (wal_reader_next(r, &rec) != 0 || rec.offset != off || rec.payload_len != 5 || memcmp(rec.payload, "after", 5) != 0)
        FAIL("appended record not read back");
    wal_reader_close(r);
    if (wal_close(w) != 0)
        FAIL("close");
    meta_t after = meta_file(dir);
    if (meta.valid && (!after.valid || after.checkpoint < meta.checkpoint || after.dropped_age != meta.dropped_age ||
                       after.dropped < meta.dropped || after.lost < meta.lost))
        FAIL("the meta file lost what it held");
    if (after.valid && after.reserved != 0)
        FAIL("a clean close kept a reservation nothing needs");

    /* a clean close: the log reopens and goes on after the batch */
    if (wal_open(&o, &w) != 0 || !(t = wal_topic_find(w, "/f/t")))
        FAIL("reopen after a clean close");
    wal_topic_stats(t, &st);
    if (st.next_offset != off + 1)
        FAIL("a clean close moved the next offset (backwards, or a needless jump)");
    if (wal_close(w) != 0)
        FAIL("close after reopen");
    fz_empty_dir(fz_root);
    free(seg);
    return 0;
}
