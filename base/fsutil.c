/*
 * fsutil.c: file-system steps with durability spelled out.
 *
 * tb_write_file_atomic is the Redis/SQLite recipe: write a temporary file
 * beside the target, fsync it, rename over the target, fsync the directory.
 * A crash at any point leaves either the old file or the new one, whole.
 */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tb_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int tb_write_file_atomic(const char *path, const void *data, size_t len)
{
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int rc = -errno;
            close(fd);
            unlink(tmp);
            return rc;
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) < 0) {
        int rc = -errno;
        close(fd);
        unlink(tmp);
        return rc;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int rc = -errno;
        unlink(tmp);
        return rc;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    return tb_fsync_dir(dirname(dir));
}

int tb_mkdir_p(const char *path, unsigned mode)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}
