/*
 * state.c: output state blobs (wal.h OUTPUT STATE; the format is
 * wal_format.h OUTPUT STATE BLOBS). A small durable file per (output, key)
 * beside the log, for what an output must remember across restarts that is
 * not a checkpoint: Sparkplug's bdSeq (incremented before every CONNECT can
 * leave) and its alias table.
 *
 * DESIGN. A put is a writer request (WAL_ITEM_STATE) waited on like
 * WAL_ITEM_OWN_BOUND, not a write from the caller's thread: every disk
 * mutation of the WAL happens on the writer (ARCHITECTURE.md), in FIFO order
 * with the batches, and through the io vtable, so the crash-injection layer
 * (tests/unit/wal/helper_crashio.c) holds, drops or applies it at a power
 * loss like any other sync. A get reads through the vtable from the
 * caller's thread: the file is only ever replaced by rename, so a reader
 * sees the old blob or the new one, never half of either.
 */
#include "wal/wal_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the format ------------------------------------------------------------ */

size_t wal__state_encode(uint8_t *out, const void *p, size_t n)
{
    memcpy(out, WAL_STATE_MAGIC, 4);
    wal__st16(out + 4, WAL_STATE_VERSION);
    wal__st16(out + 6, 0);
    wal__st32(out + 8, (uint32_t)n);
    if (n)
        memcpy(out + WAL_STATE_HEAD, p, n);
    uint32_t crc = wal__crc32c(wal__crc32c(0, out, 12), out + WAL_STATE_HEAD, n);
    wal__st32(out + 12, crc);
    return WAL_STATE_HEAD + n;
}

int wal__state_decode(const uint8_t *in, size_t size, const uint8_t **p, size_t *n)
{
    *p = NULL;
    *n = 0;
    if (size < WAL_STATE_HEAD || memcmp(in, WAL_STATE_MAGIC, 4) != 0)
        return TB_ECORRUPT;
    uint32_t len = wal__ld32(in + 8);
    if (len > WAL_STATE_MAX || size != WAL_STATE_HEAD + (size_t)len)
        return TB_ECORRUPT;
    if (wal__crc32c(wal__crc32c(0, in, 12), in + WAL_STATE_HEAD, len) != wal__ld32(in + 12))
        return TB_ECORRUPT;
    if (wal__ld16(in + 4) != WAL_STATE_VERSION)
        return TB_EUNSUPPORTED; /* framed and checksummed, a version we do not know: a newer build's */
    *p = in + WAL_STATE_HEAD;
    *n = len;
    return 0;
}

/* ---- put (writer) ------------------------------------------------------------ */

static char *state_dir(const char *root, uint16_t id)
{
    return tb_asprintf("%s/" WAL_STATES_DIR "/%u", root, (unsigned)id);
}

/* mkdir through the vtable; a new directory's parent is fsync()ed, so the
 * name survives a power loss before the blob's own rename does. */
static int mkdir_synced(wal_t *w, const char *path, const char *parent)
{
    const wal_io_t *io = w->io;
    int rc = io->mkdir(io->ctx, path, 0755);
    if (rc == -EEXIST)
        return 0;
    if (rc < 0)
        return rc;
    return wal__fsync_dir(w, WAL_CAUSE_STATE, parent);
}

int wal__state_apply(wal_t *w, const wal_req_t *req)
{
    char *top = tb_asprintf("%s/" WAL_STATES_DIR, w->dir);
    char *dir = state_dir(w->dir, req->out_id);
    char *path = tb_asprintf("%s/%s", dir, req->key);
    uint8_t *buf = tb_malloc(WAL_STATE_HEAD + req->len);
    size_t n = wal__state_encode(buf, req->data, req->len);
    int rc = mkdir_synced(w, top, w->dir);
    if (rc == 0)
        rc = mkdir_synced(w, dir, top);
    if (rc == 0)
        rc = wal__write_atomic(w, WAL_CAUSE_STATE, path, buf, n);
    if (rc < 0)
        tb_warn("wal: cannot write an output's state", TB_S("file", path), TB_ERR(rc));
    free(buf);
    free(path);
    free(dir);
    free(top);
    return rc;
}

int wal_output_state_put(wal_t *w, uint16_t id, const char *key, const void *p, size_t n)
{
    if (!key || !wal__output_name_ok(key) || n > WAL_STATE_MAX || (n && !p) || !wal__output_known(w, id))
        return TB_EINVALID;
    wal_req_t req = { .item.kind = WAL_ITEM_STATE, .out_id = id, .key = key, .data = p, .len = n };
    return wal__request(w, &req);
}

/* ---- get (any thread) -------------------------------------------------------- */

int wal_output_state_get(wal_t *w, uint16_t id, const char *key, void **p, size_t *n)
{
    *p = NULL;
    *n = 0;
    if (!key || !wal__output_name_ok(key) || !wal__output_known(w, id))
        return TB_EINVALID;
    const wal_io_t *io = w->io;
    char *dir = state_dir(w->dir, id);
    char *path = tb_asprintf("%s/%s", dir, key);
    free(dir);
    int fd = io->open(io->ctx, path, O_RDONLY, 0);
    if (fd < 0) {
        free(path);
        return fd;
    }
    uint64_t size = 0;
    int rc = io->fsize(io->ctx, fd, &size);
    uint8_t *buf = NULL;
    if (rc == 0 && size > WAL_STATE_HEAD + (uint64_t)WAL_STATE_MAX)
        rc = TB_ECORRUPT; /* larger than any blob we write: not read into memory */
    if (rc == 0) {
        buf = tb_malloc((size_t)size + 1);
        ssize_t got = wal__pread_full(io, fd, buf, (size_t)size + 1, 0);
        if (got < 0)
            rc = (int)got;
        else
            size = (uint64_t)got; /* what is there now, if it changed under us */
    }
    io->close(io->ctx, fd);
    const uint8_t *pl = NULL;
    size_t pn = 0;
    if (rc == 0)
        rc = wal__state_decode(buf, (size_t)size, &pl, &pn);
    if (rc == 0 && pn) {
        *p = tb_malloc(pn);
        memcpy(*p, pl, pn);
        *n = pn;
    }
    if (rc == TB_ECORRUPT || rc == TB_EUNSUPPORTED)
        tb_warn(rc == TB_ECORRUPT ? "wal: an output's state file is damaged (its checksum or length fails)"
                                  : "wal: an output's state file has a newer version",
                TB_S("file", path), TB_U("bytes", size));
    free(buf);
    free(path);
    return rc;
}

/* ---- remove (offline: forget-output) ---------------------------------------- */

int wal__state_remove(const char *root, uint16_t id, FILE *report)
{
    char *dir = state_dir(root, id);
    DIR *d = opendir(dir);
    if (!d) {
        int rc = errno == ENOENT ? 0 : -errno;
        free(dir);
        return rc;
    }
    int rc = 0;
    size_t files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = tb_asprintf("%s/%s", dir, e->d_name);
        if (unlink(path) < 0 && errno != ENOENT && rc == 0)
            rc = -errno;
        else
            files++;
        free(path);
    }
    closedir(d);
    if (rc == 0 && rmdir(dir) < 0 && errno != ENOENT)
        rc = -errno;
    if (rc == 0) {
        char *top = tb_asprintf("%s/" WAL_STATES_DIR, root);
        rc = tb_fsync_dir(top);
        free(top);
    }
    if (rc == 0 && report)
        fprintf(report, "output id %u: state removed (%zu file(s))\n", (unsigned)id, files);
    else if (rc < 0 && report)
        fprintf(report, "output id %u: cannot remove its state in %s (%s)\n", (unsigned)id, dir, tb_strerror(rc));
    free(dir);
    return rc;
}
