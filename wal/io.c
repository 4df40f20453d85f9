/*
 * io.c: the default (POSIX) I/O vtable and the full-transfer loops over any
 * vtable.
 *
 * Every WAL file operation goes through wal_io_t so tests can put a
 * crash-injection layer underneath (tests/unit/wal/helper_crashio.c, in the
 * manner of SQLite's test6.c). The POSIX functions only translate -1/errno
 * into -errno and retry EINTR; policy (what to do on ENOSPC, on a failed
 * fdatasync) lives with the callers.
 */
#include "wal/wal_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int px_open(void *ctx, const char *path, int flags, mode_t mode)
{
    int fd;
    do
        fd = open(path, flags | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

static int px_close(void *ctx, int fd)
{
    /* Linux releases the fd even when close reports EINTR: never retry. */
    return close(fd) < 0 && errno != EINTR ? -errno : 0;
}

static ssize_t px_pread(void *ctx, int fd, void *buf, size_t n, off_t off)
{
    ssize_t r;
    do
        r = pread(fd, buf, n, off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static ssize_t px_pwrite(void *ctx, int fd, const void *buf, size_t n, off_t off)
{
    ssize_t r;
    do
        r = pwrite(fd, buf, n, off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static int px_fdatasync(void *ctx, int fd)
{
    /* Not retried on error: after a failed fdatasync the kernel may have
     * dropped the dirty pages, and a second call can succeed without them
     * reaching the disk. The caller decides (see writer.c). */
    return fdatasync(fd) < 0 ? -errno : 0;
}

static int px_ftruncate(void *ctx, int fd, off_t len)
{
    int r;
    do
        r = ftruncate(fd, len);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

static int px_fsize(void *ctx, int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    *size = (uint64_t)st.st_size;
    return 0;
}

static int px_rename(void *ctx, const char *from, const char *to)
{
    return rename(from, to) < 0 ? -errno : 0;
}

static int px_unlink(void *ctx, const char *path)
{
    return unlink(path) < 0 ? -errno : 0;
}

static int px_mkdir(void *ctx, const char *path, mode_t mode)
{
    return mkdir(path, mode) < 0 ? -errno : 0;
}

static int px_rmdir(void *ctx, const char *path)
{
    return rmdir(path) < 0 ? -errno : 0;
}

static int px_fsync_dir(void *ctx, const char *path)
{
    return tb_fsync_dir(path);
}

static int px_write_atomic(void *ctx, const char *path, const void *data, size_t len)
{
    return tb_write_file_atomic(path, data, len);
}

static int px_random(void *ctx, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static uint64_t px_now_ms(void *ctx)
{
    return tb_wall_ms();
}

static int px_statvfs(void *ctx, const char *path, uint64_t *avail, uint64_t *total)
{
    struct statvfs st;
    int r;
    do
        r = statvfs(path, &st);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    uint64_t unit = st.f_frsize ? st.f_frsize : st.f_bsize;
    *avail = (uint64_t)st.f_bavail * unit;
    *total = (uint64_t)st.f_blocks * unit;
    return 0;
}

static const wal_io_t posix_io = {
    .ctx = NULL,
    .open = px_open,
    .close = px_close,
    .pread = px_pread,
    .pwrite = px_pwrite,
    .fdatasync = px_fdatasync,
    .ftruncate = px_ftruncate,
    .fsize = px_fsize,
    .rename = px_rename,
    .unlink = px_unlink,
    .mkdir = px_mkdir,
    .fsync_dir = px_fsync_dir,
    .write_atomic = px_write_atomic,
    .random = px_random,
    .now_ms = px_now_ms,
    .statvfs = px_statvfs,
    .rmdir = px_rmdir,
};

const wal_io_t *wal_io_posix(void)
{
    return &posix_io;
}

int wal__pwrite_all(const wal_io_t *io, int fd, const void *buf, size_t n, uint64_t off)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = io->pwrite(io->ctx, fd, p, n, (off_t)off);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return -EIO;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

ssize_t wal__pread_full(const wal_io_t *io, int fd, void *buf, size_t n, uint64_t off)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = io->pread(io->ctx, fd, p + got, n - got, (off_t)(off + got));
        if (r < 0)
            return r;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}
