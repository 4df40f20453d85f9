/*
 * rtjournal.c: the runtime QoS 2 journal (mqtt.qos2_state: runtime;
 * docs/design/MEMORY-FIRST.md section 4, C12b; docs/GUARANTEES.md).
 *
 * What it keeps: the packet ids a persistent session's QoS 2 messages to
 * memory_first topics hold between PUBREC and PUBREL, and nothing else
 * (the sessions themselves, OPEN/DETACHED/WILL, once per connect, stay in
 * the session journal, journal.c). The session journal is on flash and
 * each of its records is a sync: about 8 KiB of write_bytes per QoS 2
 * message at low rates, where a memory_first topic writes nothing for the
 * message itself. Here each record is one write(2) to a file in
 * mqtt.runtime_dir, which must be a RAM file system: the record is in the
 * kernel when the call returns, so it outlives a kill of the process (the
 * PUBREC need not wait for anything), and it is gone with the machine.
 *
 * Why losing it with the machine is safe: a memory_first QoS 2 message is
 * acknowledged (PUBREC) only once the cluster has it, and its STORED
 * record is written then (ingest.c). After a reboot no id is known, so a
 * client resending an unreleased message (DUP) has it stored again: a
 * duplicate in the cluster, never a loss; a resent PUBREL is answered
 * PUBCOMP (MQTT 5: 0x92). Both records of one id are in the same journal
 * (the session keeps which: qos2_rt), else a RELEASED lost with the RAM
 * while its STORED survives on flash would make a later message that
 * reuses the id be answered and not stored.
 *
 * Why it is not a second write-ahead log, as the design first said: a
 * wal_t is a writer thread, a LOCK, a completion queue, segments and their
 * retention for what is here a few bytes per message in RAM, where the
 * write is done before the loop goes on. One file, rewritten whole from
 * the live state at start and whenever it holds 1,024 records more than
 * twice the live ones (a rename on tmpfs: microseconds), is all it needs.
 *
 * FORMAT (all integers big endian)
 *   header, 48 bytes: "TRQ2", version u32 = 1, the boot id
 *     (/proc/sys/kernel/random/boot_id, 36 characters), check u32 of the 44
 *     bytes before it
 *   record: body length u32 (13 + client id length), check u32 of the body,
 *     body: op u8 (1 STORED, 2 RELEASED), packet id u16, session nonce u64,
 *     client id length u16, client id
 *   check: 32-bit FNV-1a. Records run to the end of the file; the first
 *   that is not well formed ends the replay (nothing after it is used).
 *
 * REPLAY: after the session journal's. A record counts only if its client
 * id names a restored persistent session with the same nonce (the nonce is
 * in the session's OPEN record): a runtime dir that outlived a wiped
 * wal.dir, or a session ended and opened again, is not taken for the one
 * it was written for. Per (client, id) the last record decides; a STORED
 * adds the id (marked runtime) and nothing here removes one the session
 * journal restored (their ids are released in their own journal). A file
 * from another boot (a directory that is not really cleared at reboot) is
 * ignored whole.
 *
 * THE CHECK: statfs on mqtt.runtime_dir (or, while it does not exist, its
 * nearest existing parent, so nothing is created on a disk) must say tmpfs
 * or ramfs; a LOCK file in it (flock) keeps two gateways apart. Otherwise,
 * or when a write fails later, a warning, and the QoS 2 state of
 * memory_first topics goes to the session journal as for log topics (the
 * live runtime ids are written there first, the runtime file removed).
 */
#include "gateway/broker/broker_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define RTJ_MAGIC "TRQ2"
#define RTJ_VERSION 1u
#define RTJ_HEADER 48
#define RTJ_BODY_MIN 13
#define RTJ_TMPFS_MAGIC 0x01021994
#define RTJ_RAMFS_MAGIC 0x858458f6
#define RTJ_FILE "qos2.journal"

static uint32_t check32(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static void be32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

static uint32_t rd32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

long broker_rtj_parse(const uint8_t *buf, size_t len, const char boot_id[BROKER_RTJ_BOOT_ID_LEN],
                      void (*fn)(void *arg, const broker_rtj_rec_t *r), void *arg, size_t *end)
{
    *end = 0;
    if (len < RTJ_HEADER || memcmp(buf, RTJ_MAGIC, 4) != 0 || rd32(buf + 4) != RTJ_VERSION ||
        rd32(buf + 44) != check32(buf, 44))
        return BROKER_RTJ_BAD_HEADER;
    if (memcmp(buf + 8, boot_id, BROKER_RTJ_BOOT_ID_LEN) != 0)
        return BROKER_RTJ_OTHER_BOOT;
    size_t at = RTJ_HEADER;
    long n = 0;
    *end = at;
    while (len - at >= 8) {
        uint32_t blen = rd32(buf + at);
        if (blen < RTJ_BODY_MIN || blen > len - at - 8)
            break;
        const uint8_t *b = buf + at + 8;
        if (rd32(buf + at + 4) != check32(b, blen) || (b[0] != 1 && b[0] != 2))
            break;
        size_t cl = (size_t)b[11] << 8 | b[12];
        if (cl == 0 || RTJ_BODY_MIN + cl != blen)
            break;
        broker_rtj_rec_t r = { .stored = b[0] == 1, .packet_id = (uint16_t)(b[1] << 8 | b[2]),
                               .client_id = (const char *)b + 13, .client_id_len = cl };
        for (int i = 0; i < 8; i++)
            r.nonce = r.nonce << 8 | b[3 + i];
        fn(arg, &r);
        n++;
        at += 8 + blen;
        *end = at;
    }
    return n;
}

/* The boot id: 36 characters, or all '?' when unreadable (then every file matches: tmpfs still
 * empties at reboot). */
static void boot_id(char out[BROKER_RTJ_BOOT_ID_LEN])
{
    memset(out, '?', BROKER_RTJ_BOOT_ID_LEN);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    char line[64];
    if (fgets(line, sizeof line, f) && strlen(line) >= BROKER_RTJ_BOOT_ID_LEN)
        memcpy(out, line, BROKER_RTJ_BOOT_ID_LEN);
    fclose(f);
}

static void put_header(uint8_t h[RTJ_HEADER])
{
    memcpy(h, RTJ_MAGIC, 4);
    be32(h + 4, RTJ_VERSION);
    char id[BROKER_RTJ_BOOT_ID_LEN];
    boot_id(id);
    memcpy(h + 8, id, BROKER_RTJ_BOOT_ID_LEN);
    be32(h + 44, check32(h, 44));
}

static void put_rec(tb_buf_t *out, const broker_session_t *s, bool stored, uint16_t id)
{
    size_t cl = strlen(s->client_id);
    if (cl > 65535)
        cl = 65535; /* MQTT client ids are at most 65,535 bytes */
    uint8_t h[8 + RTJ_BODY_MIN];
    uint8_t *b = h + 8;
    b[0] = stored ? 1 : 2;
    b[1] = (uint8_t)(id >> 8);
    b[2] = (uint8_t)id;
    for (int i = 0; i < 8; i++)
        b[3 + i] = (uint8_t)(s->nonce >> (56 - 8 * i));
    b[11] = (uint8_t)(cl >> 8);
    b[12] = (uint8_t)cl;
    be32(h, (uint32_t)(RTJ_BODY_MIN + cl));
    /* the check runs over the body: its fixed part, then the id */
    uint32_t c = 2166136261u;
    for (size_t i = 0; i < RTJ_BODY_MIN + cl; i++) {
        c ^= i < RTJ_BODY_MIN ? b[i] : (uint8_t)s->client_id[i - RTJ_BODY_MIN];
        c *= 16777619u;
    }
    be32(h + 4, c);
    tb_buf_append(out, h, sizeof h);
    tb_buf_append(out, s->client_id, cl);
}

static bool ram_fs(const char *dir, long *type)
{
    char *p = tb_strdup(dir);
    struct statfs st;
    int rc;
    while ((rc = statfs(p, &st)) != 0 && errno == ENOENT) {
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) {
            strcpy(p, "/");
            rc = statfs(p, &st);
            break;
        }
        *slash = '\0';
    }
    free(p);
    *type = rc == 0 ? (long)st.f_type : 0;
    return rc == 0 && ((unsigned long)st.f_type == RTJ_TMPFS_MAGIC || (unsigned long)st.f_type == RTJ_RAMFS_MAGIC);
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Live runtime ids: those PUBRECed (qos2 marked runtime) and those whose STORED went here but whose
 * answer waits behind an earlier one in its connection's FIFO. */
static uint64_t live_state(broker_t *srv, tb_buf_t *out)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (broker_session_t *s = srv->sess_buckets[i]; s; s = s->hnext) {
            if (!s->persistent)
                continue;
            for (uint32_t k = 0; k < s->nqos2; k++)
                if (s->qos2_rt[k]) {
                    n++;
                    if (out)
                        put_rec(out, s, true, s->qos2[k]);
                }
            for (uint32_t k = 0; k < s->nstoring; k++) {
                const broker_pending_t *p = s->storing[k].p;
                if (p && p->stored_journaled && p->stored_rt) {
                    n++;
                    if (out)
                        put_rec(out, s, true, s->storing[k].id);
                }
            }
        }
    }
    return n;
}

/* Writes the live state as a new file (temporary name, rename) and appends to it from now on. */
static int rewrite(broker_t *srv)
{
    tb_buf_t b = { 0 };
    uint8_t h[RTJ_HEADER];
    put_header(h);
    tb_buf_append(&b, h, sizeof h);
    uint64_t live = live_state(srv, &b);
    char *tmp = tb_asprintf("%s.new", srv->rtj_path);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        rc = -errno;
    if (rc == 0)
        rc = write_all(fd, b.data, b.len);
    if (rc == 0 && rename(tmp, srv->rtj_path) != 0)
        rc = -errno;
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        unlink(tmp);
    } else {
        if (srv->rtj_fd >= 0)
            close(srv->rtj_fd);
        srv->rtj_fd = fd; /* positioned at its end; nobody else writes it (LOCK) */
        srv->rtj_records = live;
        srv->rtj_compact_at = 2 * live + 1024;
    }
    free(tmp);
    tb_buf_free(&b);
    return rc;
}

/* The runtime journal cannot be written: every live runtime id goes to the session journal, the
 * file goes first (a stale STORED must never come back), and from now on everything is journaled
 * there. A kill before those records are durable costs duplicates, never a loss. */
static void fail(broker_t *srv, int err)
{
    tb_warn("the runtime QoS 2 journal cannot be written: the QoS 2 state of memory_first topics goes to the "
            "session journal on flash from now on",
            TB_S("runtime_dir", srv->cfg->mqtt.runtime_dir), TB_ERR(err));
    unlink(srv->rtj_path);
    if (srv->rtj_fd >= 0)
        close(srv->rtj_fd);
    srv->rtj_fd = -1;
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (broker_session_t *s = srv->sess_buckets[i]; s; s = s->hnext) {
            for (uint32_t k = 0; k < s->nqos2; k++)
                if (s->qos2_rt[k]) {
                    s->qos2_rt[k] = 0;
                    broker__journal_qos2(srv, s, s->qos2[k], true, NULL, false);
                }
            for (uint32_t k = 0; k < s->nstoring; k++) {
                broker_pending_t *p = s->storing[k].p;
                if (p && p->stored_journaled && p->stored_rt) {
                    p->stored_rt = false;
                    broker__journal_qos2(srv, s, s->storing[k].id, true, NULL, false);
                }
            }
        }
    }
}

bool broker__rtj_on(const broker_t *srv)
{
    return srv->rtj_fd >= 0;
}

int broker__rtj_put(broker_t *srv, broker_session_t *s, bool stored, uint16_t id)
{
    if (srv->rtj_fd < 0)
        return TB_ECLOSED;
    tb_buf_t b = { 0 };
    put_rec(&b, s, stored, id);
    int rc = write_all(srv->rtj_fd, b.data, b.len);
    tb_buf_free(&b);
    if (rc == 0 && ++srv->rtj_records > srv->rtj_compact_at)
        rc = rewrite(srv);
    if (rc < 0)
        fail(srv, rc);
    return rc;
}

typedef struct {
    uint16_t id;
    bool stored;
    uint64_t nonce;
    size_t seq;
    const char *cid;
    size_t cid_len;
} rtj_entry_t;

typedef struct {
    rtj_entry_t *e;
    size_t n, cap;
} rtj_list_t;

static void collect(void *arg, const broker_rtj_rec_t *r)
{
    rtj_list_t *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->e = tb_realloc(l->e, l->cap * sizeof *l->e);
    }
    l->e[l->n] = (rtj_entry_t){ r->packet_id, r->stored, r->nonce, l->n, r->client_id, r->client_id_len };
    l->n++;
}

static int by_key(const void *a, const void *b)
{
    const rtj_entry_t *x = a, *y = b;
    size_t n = TB_MIN(x->cid_len, y->cid_len);
    int c = memcmp(x->cid, y->cid, n);
    if (c == 0 && x->cid_len != y->cid_len)
        c = x->cid_len < y->cid_len ? -1 : 1;
    if (c == 0 && x->id != y->id)
        c = x->id < y->id ? -1 : 1;
    if (c == 0 && x->seq != y->seq)
        c = x->seq < y->seq ? -1 : 1;
    return c;
}

/* Replays the file's records into the restored sessions. */
static void replay(broker_t *srv)
{
    int fd = open(srv->rtj_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* none yet: a first start, or after a reboot */
    struct stat st;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        len = (size_t)st.st_size;
        buf = tb_malloc(len);
        size_t got = 0;
        while (got < len) {
            ssize_t r = read(fd, buf + got, len - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        len = got;
    }
    close(fd);
    char id[BROKER_RTJ_BOOT_ID_LEN];
    boot_id(id);
    rtj_list_t l = { 0 };
    size_t end = 0;
    long n = buf ? broker_rtj_parse(buf, len, id, collect, &l, &end) : 0;
    if (n == BROKER_RTJ_OTHER_BOOT || n == BROKER_RTJ_BAD_HEADER)
        tb_warn(n == BROKER_RTJ_OTHER_BOOT ? "runtime QoS 2 journal is from another boot: ignored"
                                           : "runtime QoS 2 journal has no valid header: ignored",
                TB_S("file", srv->rtj_path));
    else if (end < len)
        tb_warn("runtime QoS 2 journal ends in a damaged record: what follows it is ignored",
                TB_S("file", srv->rtj_path), TB_U("at", end), TB_U("size", len));
    qsort(l.e, l.n, sizeof *l.e, by_key);
    uint64_t restored = 0, ignored = 0;
    for (size_t i = 0; i < l.n; i++) {
        const rtj_entry_t *e = &l.e[i];
        if (i + 1 < l.n && l.e[i + 1].id == e->id && l.e[i + 1].cid_len == e->cid_len &&
            memcmp(l.e[i + 1].cid, e->cid, e->cid_len) == 0)
            continue; /* a later record of the same (client, id) decides */
        if (!e->stored)
            continue;
        char *cid = tb_strndup(e->cid, e->cid_len);
        broker_session_t *s = broker__session_find(srv, cid);
        free(cid);
        if (!s || !s->persistent || !s->nonce || s->nonce != e->nonce) {
            ignored++;
            continue;
        }
        broker__session_add_qos2_at(s, e->id, true);
        restored++;
    }
    if (restored || ignored)
        tb_info("runtime QoS 2 journal replayed", TB_S("file", srv->rtj_path), TB_U("ids_restored", restored),
                TB_U("ids_of_no_session", ignored));
    free(l.e);
    free(buf);
}

void broker__rtj_open(broker_t *srv)
{
    const cfg_t *cfg = srv->cfg;
    bool any = false;
    for (size_t i = 0; i < srv->ntopics; i++)
        any |= srv->topics[i]->durability == CFG_DURABILITY_MEMORY_FIRST;
    if (!any || cfg->mqtt.qos2_state != CFG_QOS2_STATE_RUNTIME || !srv->journal)
        return;
    const char *dir = cfg->mqtt.runtime_dir;
    long type;
    if (!ram_fs(dir, &type)) {
        tb_warn("mqtt.runtime_dir is not on a RAM file system (tmpfs or ramfs): the QoS 2 state of memory_first "
                "topics goes to the session journal on flash (about 8 KiB written per QoS 2 message with "
                "wal.fsync always)",
                TB_S("runtime_dir", dir), TB_U("f_type", (unsigned long)type));
        return;
    }
    int rc = tb_mkdir_p(dir, 0700);
    char *lock = tb_asprintf("%s/LOCK", dir);
    int lfd = rc < 0 ? -1 : open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (rc == 0 && lfd < 0)
        rc = -errno;
    if (rc == 0 && flock(lfd, LOCK_EX | LOCK_NB) != 0)
        rc = -errno;
    free(lock);
    if (rc < 0) {
        if (lfd >= 0)
            close(lfd);
        tb_warn("mqtt.runtime_dir cannot be used (another gateway holds its LOCK, or it cannot be created): "
                "the QoS 2 state of memory_first topics goes to the session journal on flash",
                TB_S("runtime_dir", dir), TB_ERR(rc));
        return;
    }
    srv->rtj_lock_fd = lfd;
    srv->rtj_path = tb_asprintf("%s/" RTJ_FILE, dir);
    replay(srv);
    rc = rewrite(srv);
    if (rc < 0) { /* the ids just restored must not be lost with the file: into the session journal */
        fail(srv, rc);
        return;
    }
    tb_info("runtime QoS 2 journal in use (memory_first topics: no flash write per QoS 2 message)",
            TB_S("file", srv->rtj_path), TB_U("ids", srv->rtj_records));
}

void broker__rtj_close(broker_t *srv)
{
    if (srv->rtj_fd >= 0)
        close(srv->rtj_fd);
    if (srv->rtj_lock_fd >= 0)
        close(srv->rtj_lock_fd);
    srv->rtj_fd = srv->rtj_lock_fd = -1;
    free(srv->rtj_path);
    srv->rtj_path = NULL;
}
