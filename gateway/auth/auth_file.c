/*
 * auth_file.c: what the password file and the acl_file readers share:
 * reading one file whole (with a size limit, so a wrong path such as a
 * disk image cannot eat memory), splitting it into lines the way both
 * formats want them, and error messages that name the file and line.
 *
 * Ours rather than Mosquitto's: libmosquitto has no password or ACL code
 * and the broker's is not a library (auth.h).
 */
#include "gateway/auth/auth_int.h"

#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void auth__error(auth_error_t *err, const char *name, unsigned line, const char *fmt, ...)
{
    if (!err)
        return;
    err->line = line;
    int n = line ? snprintf(err->msg, sizeof err->msg, "%s:%u: ", name, line)
                 : snprintf(err->msg, sizeof err->msg, "%s: ", name);
    if (n < 0 || (size_t)n >= sizeof err->msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    va_end(ap);
}

int auth__read_file(const char *path, char **text, size_t *len, auth_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        auth__error(err, path, 0, "cannot open: %s", tb_strerror(-errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        auth__error(err, path, 0, "is a directory");
        return -1;
    }
    /* Read up to one byte past the limit: a pipe or /proc file has no size. */
    size_t cap = 4096, n = 0;
    char *buf = tb_malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > AUTH_MAX_FILE_BYTES)
                break;
            cap = TB_MIN(cap * 2, (size_t)AUTH_MAX_FILE_BYTES + 1);
            buf = tb_realloc(buf, cap + 1);
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            close(fd);
            free(buf);
            auth__error(err, path, 0, "cannot read: %s", tb_strerror(-e));
            return -1;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    if (n > AUTH_MAX_FILE_BYTES) {
        free(buf);
        auth__error(err, path, 0, "bigger than %u MiB: refused", AUTH_MAX_FILE_BYTES >> 20);
        return -1;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

void auth__lines_init(auth__lines_t *it, const char *text, size_t len)
{
    it->p = text;
    it->end = text + len;
    it->line = 0;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

bool auth__lines_next(auth__lines_t *it, const char **line, size_t *len)
{
    if (it->p >= it->end)
        return false;
    const char *s = it->p;
    const char *nl = memchr(s, '\n', (size_t)(it->end - s));
    const char *e = nl ? nl : it->end;
    it->p = nl ? nl + 1 : it->end;
    it->line++;
    while (e > s && (e[-1] == '\r' || blank(e[-1])))
        e--;
    while (s < e && blank(*s))
        s++;
    *line = s;
    *len = (size_t)(e - s);
    return true;
}

bool auth__line_skip(const char *line, size_t len)
{
    return len == 0 || line[0] == '#';
}
