/*
 * wal_format.h: the on-disk format of the write-ahead log, written down once.
 *
 * A format change updates this comment, bumps WAL_FORMAT_VERSION and adds or
 * regenerates the golden files in tests/data/wal/ in the same commit.
 *
 * LAYOUT
 *
 *   <wal.dir>/LOCK                       flock()ed by the one process using the WAL
 *   <wal.dir>/<topic-dir>/               one directory per upstream topic
 *   <wal.dir>/<topic-dir>/meta           checkpoint, floor, counters (atomic replace)
 *   <wal.dir>/<topic-dir>/<base>.seg     segments, <base> = first offset, 20 digits,
 *                                        zero-padded, so lexical order is numeric order
 *   <wal.dir>/<topic-dir>/<base>.seg.corrupt   a quarantined segment (never read again)
 *
 * The topic directory name is the topic with every byte outside
 * [A-Za-z0-9_-] escaped: '/' becomes '+', anything else '%XX' (upper-case
 * hex). "/edge1/telemetry" is "+edge1+telemetry". The mapping is reversible
 * and never yields "." or "..".
 *
 * All integers are little-endian. Offsets start at 1: 0 is never the offset of
 * a record, so a checkpoint of 0 means "nothing replicated yet", and a
 * cluster that remembers "the highest batch_last_offset stored" with a
 * default of 0 can never swallow the first message.
 *
 * SEGMENT HEADER (32 bytes, at file offset 0)
 *
 *    0   4  magic     "TBWL"
 *    4   2  version   WAL_FORMAT_VERSION (2) for every segment written now;
 *                     1 is still read (see VERSIONS)
 *    6   2  hdr_size  32
 *    8   8  base      offset of the first record in this segment; equals the
 *                     number in the file name
 *   16   8  created   wall-clock ms since the epoch when the segment was made
 *   24   4  salt      random (getrandom) per segment
 *   28   4  hcrc      CRC32C of bytes 0..27
 *
 * A header is valid when the magic and hcrc match, the version is 1 or 2,
 * the size is 32 and base equals the file name. A segment is only ever
 * renamed to its final name after its header has been written and
 * fdatasync()ed under a ".tmp" name, and the directory fsync()ed, so a valid
 * name always has a whole header.
 *
 * RECORD (a 28-byte fixed head, then variable parts; no alignment)
 *
 *    0   4  len       bytes in the whole record, this field included
 *    4   4  crc       CRC32C of (salt as its 4 stored bytes) || record bytes 8..len-1
 *    8   8  offset    the record's offset
 *   16   8  time      publish_time_ms (ms since the epoch, when the edge got it)
 *   24   1  flags     bits 0-1 MQTT QoS (0..2), bit 2 retain, bit 3 schema present,
 *                     bit 4 padding (version 2; see PADDING), bits 5-7 zero
 *   25   1  nattr     number of attributes (0..255)
 *   26   2  tlen      bytes in the original MQTT topic
 *   28  12  schema    [only if flag bit 3] u64 schema_id, u32 schema_version
 *    .   .  attrs     nattr times { u16 klen, u16 vlen, key[klen], value[vlen] }
 *    .   .  topic     tlen bytes: the MQTT topic the device published to
 *    .   .  payload   the rest of the record (len minus everything above)
 *
 * The fixed head is 28 bytes (40 with a schema); a 100-byte payload sent to a
 * 20-byte MQTT topic costs 148 bytes on disk (plus its share of padding, if
 * any: see PADDING).
 *
 * THE RULE FOR A VALID RECORD. Records are read in order from byte 32. The
 * record at position p with expected offset E (the segment's base for the
 * first record, then the previous message record's offset + 1) is valid when:
 *   - p + 28 <= file size, 28 <= len <= WAL_RECORD_MAX and p + len <= file size;
 *   - crc matches, with this segment's salt;
 *   - offset == E;
 *   - the flags' reserved bits are zero (version 1: bits 4-7; version 2:
 *     bits 5-7) and qos <= 2;
 *   - if flag bit 4 is set (version 2 only): flags is exactly 0x10, nattr
 *     and tlen are 0 and len <= WAL_PAD_MAX: a padding record (below);
 *   - otherwise the schema, attributes and topic fit inside len.
 * A valid padding record is stepped over: the next record is expected at
 * p + len with the same E. The valid records of a segment are the longest
 * valid prefix (padding included). Anything after the first invalid record
 * is not part of the log: in the active (newest) segment it is a torn tail
 * and is cut off by recovery; in a sealed segment it is corruption and the
 * segment is quarantined (see recover.c).
 *
 * PADDING (version 2). Linux writes a page of the page cache again each time
 * it goes from clean to dirty, and fdatasync cleans the partly filled last
 * page of a segment; the next append dirties it again. With wal.fsync =
 * always that is a page written twice per sync. So the writer may end a
 * synced write on a page boundary with one padding record, and the next
 * append starts on a fresh page (writer.c and pad.c say when it does: not
 * always, since padding takes disk space):
 *
 *    0   4  len       28 .. WAL_PAD_MAX (64 KiB): the bytes up to the boundary
 *    4   4  crc       as for any record: CRC32C of (salt) || bytes 8..len-1
 *    8   8  offset    the offset of the message record that FOLLOWS it
 *   16   8  time      0
 *   24   1  flags     0x10 exactly
 *   25   1  nattr     0
 *   26   2  tlen      0
 *   28   .  zero      len - 28 zero bytes (covered by the CRC, not checked apart)
 *
 * It holds no message and takes no offset: readers, wal_dump and the
 * replicator never see it, wal_check counts its bytes apart, and it counts
 * in the disk bounds like any byte of a segment. Boundaries are multiples of
 * the writer's alignment (the page size, or the file system's st_blksize if
 * larger, up to 64 KiB) from the start of the file; the rule does not
 * depend on the alignment, so a segment stays valid on any file system.
 *
 * Why a record of its own, with length, CRC and offset, and not a rule such
 * as "a zero length word means: skip to the next page boundary". Zeros are
 * exactly what a torn append leaves behind (blocks allocated to a grown file
 * but never written read back as zeros), and what the ENOSPC probe writes
 * past the end (writer.c). Under a zero-means-skip rule a torn tail of zeros
 * would read as valid padding: recovery could no longer tell "the writer
 * padded here" from "this write never landed", it would keep the zeros and
 * look for the next record a page further on, and only the offset rule
 * would stand between a hole in the log and whatever follows it. A padding
 * record has to prove it was written whole, as every record does: a torn or
 * garbled one fails its length or CRC and is a torn tail like any other (the
 * records before it stay); zeros still fail (len 0 < 28); one left from an
 * older file fails its salted CRC; one from elsewhere in this segment names
 * another offset. So torn-tail detection is exactly as strong as in
 * version 1. The cost: at least 28 bytes, so a gap of 1..27 bytes before a
 * boundary cannot be padded (the next append shares that page).
 *
 * VERSIONS. Version 1 (before padding) is version 2 without padding
 * records: the header differs only in the version field, records are byte
 * for byte the same (tests/data/wal/v1/ pins both). Version 1 segments are
 * read, recovered and dumped with the version 1 rule (flag bit 4 reserved, so
 * a padding record there is invalid). A segment is written in one version
 * only: recovery seals an active version 1 segment (it syncs it whole first)
 * and continues in a new segment, so padding never lands in a version 1
 * file. A binary that knows only version 1 sees a version 2 header as
 * unsupported and quarantines the segment: downgrading across this change
 * loses the log written since.
 *
 * THE CHECKSUM is CRC32C (Castagnoli), the checksum of iSCSI, ext4 metadata,
 * btrfs and LevelDB/RocksDB, rather than zlib's CRC32: x86 (SSE4.2 crc32) and
 * ARMv8 (CRC extension) compute it in hardware at several GB/s, so it costs
 * nothing beside the write, and at the record lengths we write its
 * polynomial detects more error patterns: Hamming distance 6 up to 5,243
 * data bits, where IEEE CRC32 has 5 (Koopman's tables). It is seeded with the segment's salt, so a record left behind by
 * an older file that used the same blocks, or copied from another segment,
 * cannot validate: its salt differs and so does its CRC. The offset sits in
 * the checksummed bytes, so a record of this segment in the wrong place
 * fails the offset rule.
 *
 * WHY A CRASH AT ANY POINT IS SAFE.
 *   - Appends only ever add bytes after the last valid record. A crash during
 *     a write leaves a prefix of the new bytes, possibly with garbage where
 *     the file system had allocated blocks but not written them; the first
 *     incomplete or garbled record fails its length or CRC check, so the log
 *     ends at the last whole record. Because every record carries its own
 *     CRC and offset, no record after a torn one can be taken for valid.
 *   - What a completion reports as durable (wal.fsync = always) was covered
 *     by a successful fdatasync() of every file holding it, so it is inside
 *     the valid prefix after power loss.
 *   - Padding is written after a round's records and before its
 *     fdatasync, as an append like any other: a crash leaves it whole
 *     (valid), torn (a torn tail: cut, the records before it stay) or
 *     absent. Once synced it is never cut or written over: the writer
 *     appends after it, and a failed write or sync cuts back only to the
 *     last synced end, which lies after it.
 *   - A segment is created whole (header written and synced under a temporary
 *     name, renamed, directory synced): there is never a final name without
 *     a valid header. Rotation fdatasync()s the old segment before creating
 *     the next, so every sealed segment was synced in full when it was
 *     sealed; damage inside a sealed segment is therefore real corruption,
 *     not a torn write, and it is quarantined rather than cut.
 *   - Segments are deleted only after the meta file naming the new floor
 *     (first retained offset) has been atomically replaced; a crash between
 *     the two leaves segments below the floor, which recovery deletes
 *     without counting them as dropped a second time.
 *   - meta is replaced with write-temp, fdatasync, rename, fsync-directory:
 *     after a crash it is either the old or the new version, whole.
 *
 * META FILE (version 1: 64 bytes; version 2: 80 bytes; version 3: 84 + 32 n). The meta file has
 * a version of its own, WAL_META_VERSION, apart from the segments'; a change
 * to it bumps that one (and adds golden files: tests/data/wal/meta-v*.bin).
 *
 *    0   4  magic     "TBWM"
 *    4   2  version   1 or 2
 *    6   2  size      64 (version 1) or 80 (version 2): the file's length
 *    8   8  floor     every offset below it was deleted (or never existed)
 *   16   8  checkpoint  highest offset acknowledged by the cluster (0: none)
 *   24   8  dropped   messages deleted before the cluster acknowledged them
 *   32   8  quarantined  segments set aside as corrupt
 *   40   8  lost      acknowledged messages lost to an fdatasync() failure
 *  version 1:
 *   48  12  zero
 *   60   4  crc       CRC32C of bytes 0..59
 *  version 2:
 *   48   8  reserved  offsets below it may have been given to a reader
 *                     without being in the log (0: none); the next offset
 *                     after any restart is at or above it (OFFSET RESERVATION)
 *   56   8  dropped_age  messages dropped for being older than their topic's
 *                     max_age (0: none)
 *   64  12  zero
 *   76   4  crc       CRC32C of bytes 0..75
 *  version 3 (CURSOR SLOTS: several outputs read the topic, each with its
 *  own checkpoint): version 2's fields at the same places, then a table
 *   64   2  n         slots, at most 32 (WAL_MAX_CURSORS)
 *   66  14  zero
 *   80 + 32 i  slot i:  0 2 id (the output's, <wal.dir>/OUTPUTS)
 *                       2 2 flags (bit 0: protects; informational)   4 4 zero
 *                       8 8 checkpoint   16 8 dropped   24 8 dropped_age
 *   80 + 32 n  4  crc  CRC32C of every byte before
 *  so the size is 84 + 32 n (1,108 bytes at most: one page, one atomic
 *  replace whatever the number of outputs). In version 3 the header's
 *  checkpoint is the highest the minimum over the waited-for slots ever
 *  reached (what deleted segments), dropped is the topic's (deleted while
 *  at least one waited-for output had not acknowledged it) and dropped_age
 *  slot 0's; each slot has its own. Slot ids are distinct.
 *
 * Every version frames the file the same way: the magic, the size field
 * equal to the file's length, the crc in the last 4 bytes over all before
 * it. A file so framed with a version other than 1, 2 or 3 is TB_EUNSUPPORTED
 * (a newer build's); otherwise it is valid when its size is that of its
 * version (and, in version 3, of its n), floor, checkpoint, reserved and
 * every slot's checkpoint are at most WAL_OFFSET_MAX (2^62: no log gets
 * there, and offsets computed from them cannot wrap) and no slot id repeats,
 * else TB_ECORRUPT. The zero bytes are written as zeros and not checked.
 * Recovery treats an invalid meta file as absent (logged).
 *
 * Which version is written: version 3 as soon as the topic has a slot
 * other than the default one (id 0, the Danube output and every caller of
 * wal_checkpoint); while it has only that one, version 1 while reserved and
 * dropped_age are both 0, else version 2. So a log that never reserved offsets nor dropped a
 * message for its age keeps a file every older build reads, and a gateway
 * can be downgraded across this change (an older build takes a version 2
 * file for corrupt: it would restart replication at the oldest record on
 * disk, which the cluster skips, and restart the counters). A clean close
 * clears a reservation that nothing needs any more (wal.h, OFFSET
 * RESERVATION), so after a clean stop the file is version 1 again unless
 * dropped_age is set.
 *
 * OFFSET RESERVATION. Offsets may be handed to readers before their records
 * are in the log (memory-first durability: held in memory while the cluster
 * confirms). Each such offset is first covered by a durable reservation:
 * reserved is raised in the meta file (atomic replace, synced) before any
 * offset below it is handed out, once per reserve_span offsets. Recovery
 * continues at the largest of the log's own next offset and reserved, so
 * after a kill or a power loss no offset the cluster may have seen is given
 * to another message. reserved never goes down while offsets below it may
 * have been handed out; a clean close lowers it to what was really handed
 * out (0 when every such offset is below the log's end).
 *
 * OUTPUT STATE BLOBS (state.c; wal.h wal_output_state_put). A small durable
 * blob per (output, key), for an output's own state (Sparkplug's bdSeq and
 * alias table), at
 *
 *   <wal.dir>/$outputs/<id>/<key>    id: the output's (OUTPUTS), in decimal;
 *                                    key: [A-Za-z0-9_-]{1,64}
 *
 *    0   4  magic     "TBOS"
 *    4   2  version   1 (WAL_STATE_VERSION)
 *    6   2  zero
 *    8   4  n         payload bytes, at most WAL_STATE_MAX (1 MiB)
 *   12   4  crc       CRC32C of bytes 0..11, then of the payload
 *   16   n  payload   the output's bytes, opaque here
 *
 * A file is valid when it is exactly 16 + n bytes, the magic and crc match
 * and n <= WAL_STATE_MAX; a version other than 1 in a file otherwise so
 * framed (magic, size, crc) is TB_EUNSUPPORTED; anything else TB_ECORRUPT.
 * Written only by the writer thread with the io vtable's write_atomic (temp,
 * fsync, rename, fsync dir): after a crash the old blob or the new one,
 * whole. The directories are made through the vtable too, each parent
 * fsync()ed after a mkdir. `$outputs` decodes to no topic, so the open's
 * scan never takes it for one; wal_forget_output removes <id>/ before it
 * frees the id in OUTPUTS, so a reused id never inherits a forgotten
 * output's state.
 *
 * RETIRED FILE (retired.c; wal.h RETIRING A TOPIC). <wal.dir>/RETIRED, the
 * tombstones of topics removed from the log; absent = no entry. Written
 * only by the writer thread (or wal_open before it starts) with the io
 * vtable's write_atomic; read at wal_open. It is a file, and "RETIRED"
 * decodes to a topic name, but the open's scan takes directories only.
 *
 *    0   4  magic    "TBWR"
 *    4   2  version  1 (WAL_RETIRED_VERSION)
 *    6   2  zero
 *    8   4  count    entries, at most 65535
 *   12   4  crc      CRC32C of bytes 0..11, then of bytes 16..end
 *   16      entries, each 72 bytes and its name:
 *      0   2  name_len   1..200 (the topic name's limit)
 *      2   2  flags      bit 0 FORGOTTEN (deleted with a backlog); others zero
 *      4   4  zero
 *      8   8  next       the first offset a re-created topic of this name uses
 *     16   8  checkpoint at removal (< next)
 *     24   8  dropped    the meta file's
 *     32   8  lost
 *     40   8  quarantined
 *     48   8  dropped_age
 *     56   8  forgotten  messages deleted unreplicated (0 unless FORGOTTEN)
 *     64   8  removed_ms wall clock
 *     72   n  name       the topic, no NUL in it, zero-padded to a multiple of 8
 *
 * Valid when the magic and crc match, the entries fill the file exactly and
 * are count in number, every name is 1..200 bytes without a NUL and names
 * no other entry, next is 1..2^62, checkpoint < next and the flags and
 * forgotten agree; a version other than 1 in a file with a good crc is
 * TB_EUNSUPPORTED, anything else TB_ECORRUPT. A damaged file is logged,
 * renamed RETIRED.corrupt and taken as empty (the only harm: a name
 * re-created later could restart at offset 1; logged as such). About 96 B
 * per topic with a 20-byte name. Golden files in tests/data/wal/retired/.
 *
 * Why a crash is safe: the entry is written (atomic replace) before the
 * directory is touched, and the directory is removed files first, rmdir
 * last, the log's directory fsync()ed. At wal_open a directory whose name
 * has an entry and whose meta floor is below the entry's next (or that has
 * no meta) is a removal interrupted: finished (what is gone is skipped). A
 * re-creation writes the new directory's meta with floor = next before it
 * drops the entry, so a directory whose floor is at or above next is the
 * re-created topic: the entry goes. (A retirement interrupted in a
 * directory whose floor had already reached next, every record deleted,
 * is taken for a re-creation: the topic comes back whole, offsets
 * continuing, and retiring it again finishes.)
 */
#ifndef WAL_FORMAT_H
#define WAL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define WAL_FORMAT_VERSION 2u
#define WAL_FORMAT_MIN_VERSION 1u   /* the oldest version still read */
#define WAL_SEG_MAGIC "TBWL"
#define WAL_META_MAGIC "TBWM"
#define WAL_SEG_HDR_SIZE 32u
#define WAL_REC_HEAD 28u
#define WAL_REC_SCHEMA 12u
#define WAL_REC_ATTR_HEAD 4u
#define WAL_META_VERSION 3u      /* the newest meta version; 1 and 2 are still read and written (META FILE) */
#define WAL_META_V1_SIZE 64u
#define WAL_META_V2_SIZE 80u
#define WAL_META_V3_HEAD 80u     /* version 3: the header, then 32 bytes per slot, then the crc */
#define WAL_META_SLOT_SIZE 32u
#define WAL_MAX_CURSORS 32u      /* slots (outputs) per topic, until forgotten */
#define WAL_META_V3_SIZE(n) (WAL_META_V3_HEAD + WAL_META_SLOT_SIZE * (n) + 4u)
#define WAL_META_MAX WAL_META_V3_SIZE(WAL_MAX_CURSORS)
#define WAL_META_READ_MAX 4096u     /* meta files are read up to this, so a newer version is told from damage */
#define WAL_OFFSET_MAX (1ull << 62) /* no valid meta names an offset above it */
#define WAL_RECORD_MAX (64u * 1024u * 1024u)
#define WAL_PAD_MAX (64u * 1024u)   /* the longest padding record, and the largest alignment */
#define WAL_STATE_MAGIC "TBOS"
#define WAL_STATE_VERSION 1u
#define WAL_STATE_HEAD 16u
#define WAL_STATES_DIR "$outputs"   /* <wal.dir>/$outputs/<id>/<key> (OUTPUT STATE BLOBS) */
#define WAL_RETIRED_MAGIC "TBWR"
#define WAL_RETIRED_VERSION 1u
#define WAL_RETIRED_HEAD 16u
#define WAL_RETIRED_ENTRY 72u
#define WAL_RETIRED_MAX_ENTRIES 65535u
#define WAL_RETIRED_NAME_MAX 200u
#define WAL_RETIRED_READ_MAX (WAL_RETIRED_HEAD + WAL_RETIRED_MAX_ENTRIES * (WAL_RETIRED_ENTRY + WAL_RETIRED_NAME_MAX))

#define WAL_FLAG_QOS_MASK 0x03u
#define WAL_FLAG_RETAIN 0x04u
#define WAL_FLAG_SCHEMA 0x08u
#define WAL_FLAG_PAD 0x10u          /* version 2: a padding record */
#define WAL_FLAG_RESERVED 0xE0u
#define WAL_FLAG_RESERVED_V1 0xF0u

/* Segment file names: 20 digits + ".seg". */
#define WAL_SEG_NAME_LEN 24u
#define WAL_SEG_SUFFIX ".seg"
#define WAL_CORRUPT_SUFFIX ".corrupt"

/* ---- little-endian loads and stores (records are not aligned) ---------- */

static inline uint16_t wal__ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t wal__ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t wal__ld64(const uint8_t *p) { return wal__ld32(p) | (uint64_t)wal__ld32(p + 4) << 32; }
static inline void wal__st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void wal__st32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void wal__st64(uint8_t *p, uint64_t v) { wal__st32(p, (uint32_t)v); wal__st32(p + 4, (uint32_t)(v >> 32)); }

/* ---- CRC32C (crc32c.c) -------------------------------------------------- */

/* Extends a CRC32C: wal__crc32c(0, buf, n) is the CRC32C of buf, and
 * wal__crc32c(wal__crc32c(0, a, n), b, m) is the CRC32C of a || b. */
uint32_t wal__crc32c(uint32_t crc, const void *buf, size_t n);
/* The table-driven path alone, for tests comparing it with the hardware path. */
uint32_t wal__crc32c_sw(uint32_t crc, const void *buf, size_t n);
/* "sse4.2", "armv8-crc" or "table": what wal__crc32c uses on this CPU. */
const char *wal__crc32c_impl(void);

/* ---- segment header (format.c) ------------------------------------------ */

typedef struct wal_seghdr {
    uint16_t version; /* decode: as read (1 or 2); encode always writes WAL_FORMAT_VERSION */
    uint64_t base;
    uint64_t created_ms;
    uint32_t salt;
    uint32_t seed; /* wal__crc32c(0, salt bytes): where every record CRC starts */
} wal_seghdr_t;

void wal__seghdr_encode(uint8_t out[WAL_SEG_HDR_SIZE], const wal_seghdr_t *h);
/* Returns 0 and fills *h, or TB_ECORRUPT (bad magic, size, CRC) or
 * TB_EUNSUPPORTED (a version outside WAL_FORMAT_MIN_VERSION..WAL_FORMAT_VERSION). */
int wal__seghdr_decode(const uint8_t in[WAL_SEG_HDR_SIZE], wal_seghdr_t *h /* OUT */);

/* ---- records (format.c) ------------------------------------------------- */

/* A decoded record; every pointer is a view into the bytes decoded. */
typedef struct wal_rec {
    uint32_t len;
    uint64_t offset;
    uint64_t time_ms;
    uint8_t flags;
    uint8_t nattr;
    uint64_t schema_id;
    uint32_t schema_version;
    const uint8_t *attrs; /* nattr x {klen, vlen, key, value} */
    uint32_t attrs_len;
    const uint8_t *topic;
    uint16_t topic_len;
    const uint8_t *payload;
    uint32_t payload_len;
} wal_rec_t;

/* Outcome of looking at the bytes at a record position. */
enum {
    WAL_REC_OK = 0,       /* a valid record */
    WAL_REC_SHORT = 1,    /* fewer bytes than the length asks for: need more, or a torn tail */
    WAL_REC_BAD = 2,      /* not a valid record (length, CRC, offset or layout) */
    WAL_REC_PAD = 3,      /* a valid padding record: step over r->len bytes, same offset */
};

/* Reads the length field; 0 if fewer than 4 bytes are available. */
static inline uint32_t wal__rec_len(const uint8_t *p, size_t avail) { return avail < 4 ? 0 : wal__ld32(p); }

/* Applies the validity rule of segment version `version` to the bytes at p
 * (avail bytes available there, and at most file_left bytes to the end of
 * the file, which bounds len before a caller allocates for it). Returns
 * WAL_REC_OK and fills *r, WAL_REC_PAD (only r->len and r->offset are set),
 * WAL_REC_SHORT when len is plausible but more than avail bytes are needed
 * (the caller reads more, or at end of file it is a torn tail), or WAL_REC_BAD. */
int wal__rec_decode(const uint8_t *p, size_t avail, uint64_t file_left, uint32_t seed, unsigned version,
                    uint64_t expect_offset, wal_rec_t *r /* OUT */);

/* Sets the offset and CRC of an encoded record in place (writer thread). */
void wal__rec_seal(uint8_t *rec, uint64_t offset, uint32_t seed);
/* Parses a record of this format version held in memory (len bytes at p,
 * its offset field set, its CRC not: memory is not a disk), as
 * wal__rec_decode does after its CRC check. WAL_REC_OK or WAL_REC_BAD. */
int wal__rec_parse(const uint8_t *p, uint32_t len, uint64_t offset, wal_rec_t *r);

/* Writes a sealed padding record of len bytes (WAL_REC_HEAD..WAL_PAD_MAX)
 * at out, naming next_offset, the offset of the record that will follow. */
void wal__pad_encode(uint8_t *out, uint32_t len, uint64_t next_offset, uint32_t seed);

/* ---- meta file (format.c) ----------------------------------------------- */

/* One output's slot in a version 3 meta file (CURSOR SLOTS). */
typedef struct wal_meta_slot {
    uint16_t id;           /* the output's id in <wal.dir>/OUTPUTS */
    uint16_t flags;        /* WAL_SLOT_F_PROTECTS (informational) */
    uint64_t checkpoint;
    uint64_t dropped;      /* deleted before this output acknowledged them */
    uint64_t dropped_age;  /* this output skipped for their age */
} wal_meta_slot_t;
#define WAL_SLOT_F_PROTECTS 1u

typedef struct wal_meta {
    uint64_t floor;
    uint64_t checkpoint;
    uint64_t dropped;
    uint64_t quarantined;
    uint64_t lost;
    uint64_t reserved;     /* version 2 (0 when read from version 1) */
    uint64_t dropped_age;  /* version 2 (0 when read from version 1) */
    /* version 3: the slot table. nslots 0 is the implied single default
     * slot (id 0) of versions 1 and 2: its checkpoint, dropped and
     * dropped_age are the topic's. Unused entries are zero. */
    uint16_t nslots;
    wal_meta_slot_t slots[WAL_MAX_CURSORS];
} wal_meta_t;

/* The version wal__meta_encode writes for m: 3 when it has a slot table
 * (nslots > 0), else 1 while reserved and dropped_age are 0, else 2. */
unsigned wal__meta_version(const wal_meta_t *m);
/* Encodes m at out; returns the file's size (WAL_META_V1_SIZE, _V2_SIZE or _V3_SIZE(n)). */
size_t wal__meta_encode(uint8_t out[WAL_META_MAX], const wal_meta_t *m);
/* Decodes a whole meta file of n bytes. Returns 0 and fills *m (and
 * *version, if not NULL: the file's version), TB_EUNSUPPORTED for an unknown
 * version, or TB_ECORRUPT; on error *m is zeroed. */
int wal__meta_decode(const uint8_t *in, size_t n, wal_meta_t *m /* OUT */, unsigned *version /* OUT */);

/* ---- output state blobs (state.c) ----------------------------------------- */

/* Encodes payload p (n <= WAL_STATE_MAX bytes) at out (WAL_STATE_HEAD + n
 * bytes); returns the file's size. */
size_t wal__state_encode(uint8_t *out, const void *p, size_t n);
/* Decodes a whole state file of size bytes: 0 with *p (a view into in) and
 * *n, TB_EUNSUPPORTED (a newer version) or TB_ECORRUPT. */
int wal__state_decode(const uint8_t *in, size_t size, const uint8_t **p /* OUT */, size_t *n /* OUT */);

#endif
