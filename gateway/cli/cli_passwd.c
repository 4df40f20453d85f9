/*
 * cli_passwd.c: `tributary passwd [--iterations N] [--delete] FILE USER`,
 * the password file's editor, writing what mosquitto_passwd writes
 * (`user:$7$ITER$SALT$HASH`, PBKDF2-HMAC-SHA512, a fresh 12-byte salt), so
 * either tool edits the other's files.
 *
 * The password never comes from the command line (it would be in the
 * process list and the shell's history): from the terminal, asked twice
 * without echo, or, when stdin is not a terminal, its first line. The file
 * is replaced atomically (a temporary file in the same directory, fsync,
 * rename), created 0600 if missing, other lines kept as they were; a line
 * for USER is replaced, or appended. The result is parsed before the rename
 * (auth_passwd_parse), so the command never leaves a file the gateway
 * would refuse.
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#define MAX_PASSWORD 1024

/* One line from stdin into buf (no newline); echo off on a terminal. */
static int read_line(const char *prompt, bool tty, char *buf, size_t len)
{
    struct termios old, quiet;
    if (tty) {
        fputs(prompt, stderr);
        fflush(stderr);
        if (tcgetattr(STDIN_FILENO, &old) == 0) {
            quiet = old;
            quiet.c_lflag &= ~(tcflag_t)ECHO;
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        }
    }
    bool ok = fgets(buf, (int)len, stdin) != NULL;
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fputc('\n', stderr);
    }
    if (!ok)
        return -1;
    size_t n = strcspn(buf, "\r\n");
    if (buf[n] == '\0' && n == len - 1)
        return -2; /* longer than the buffer */
    buf[n] = '\0';
    return 0;
}

static int get_password(char *pw, size_t len)
{
    bool tty = isatty(STDIN_FILENO);
    if (read_line("Password: ", tty, pw, len) < 0) {
        fprintf(stderr, "tributary passwd: no password read (at most %d bytes, on one line)\n", MAX_PASSWORD - 1);
        return -1;
    }
    if (tty) {
        char again[MAX_PASSWORD];
        if (read_line("Reenter password: ", tty, again, sizeof again) < 0 || strcmp(pw, again) != 0) {
            fprintf(stderr, "tributary passwd: the passwords do not match\n");
            return -1;
        }
    }
    if (!*pw) {
        fprintf(stderr, "tributary passwd: an empty password is not allowed\n");
        return -1;
    }
    return 0;
}

/* The file's text (empty when it does not exist); NULL on error. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno != ENOENT)
            return NULL;
        *len = 0;
        return tb_strdup("");
    }
    size_t cap = 4096, n = 0;
    char *buf = tb_malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 >= cap) {
            if (cap >= AUTH_MAX_FILE_BYTES) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            cap *= 2;
            buf = tb_realloc(buf, cap);
        }
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Is line (len bytes) USER's entry? */
static bool is_user_line(const char *line, size_t len, const char *user)
{
    size_t u = strlen(user);
    return len > u && memcmp(line, user, u) == 0 && line[u] == ':';
}

static int write_atomically(const char *path, const char *text, size_t len, mode_t mode)
{
    size_t plen = strlen(path);
    char *tmp = tb_malloc(plen + 16);
    snprintf(tmp, plen + 16, "%s.tmp%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) {
        fprintf(stderr, "tributary passwd: %s: %s\n", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            break;
        off += (size_t)w;
    }
    int rc = off == len && fsync(fd) == 0 ? 0 : -1;
    if (close(fd) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc < 0) {
        fprintf(stderr, "tributary passwd: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: tributary passwd [--iterations N] [--delete] FILE USER\n"
                 "  adds or replaces USER in the Mosquitto-format password file FILE ($7$, PBKDF2-SHA512);\n"
                 "  the password is asked twice on a terminal, or read from stdin's first line.\n"
                 "  --iterations N   PBKDF2 iterations (default %d, as mosquitto_passwd)\n"
                 "  --delete         remove USER instead\n",
            AUTH_PASSWD_DEFAULT_ITERATIONS);
}

int cli_passwd(int argc, char **argv)
{
    static const struct option opts[] = {
        { "iterations", required_argument, NULL, 'I' },
        { "delete", no_argument, NULL, 'D' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long iterations = AUTH_PASSWD_DEFAULT_ITERATIONS;
    bool del = false;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "I:Dh", opts, NULL)) != -1) {
        switch (ch) {
        case 'I': {
            char *end;
            errno = 0;
            iterations = strtoul(optarg, &end, 10);
            if (errno || *end || iterations < 1 || iterations > 10000000) {
                fprintf(stderr, "tributary passwd: --iterations takes 1 to 10000000\n");
                return GW_EXIT_USAGE;
            }
            break;
        }
        case 'D': del = true; break;
        case 'h': usage(stdout); return GW_EXIT_OK;
        default: usage(stderr); return GW_EXIT_USAGE;
        }
    }
    if (argc - optind != 2) {
        usage(stderr);
        return GW_EXIT_USAGE;
    }
    const char *path = argv[optind], *user = argv[optind + 1];
    if (!*user || strpbrk(user, ":\r\n") || user[0] == '#') {
        fprintf(stderr, "tributary passwd: a user name cannot be empty, begin with '#', or hold ':' or a line break\n");
        return GW_EXIT_USAGE;
    }
    size_t len;
    char *old = read_file(path, &len);
    if (!old) {
        fprintf(stderr, "tributary passwd: cannot read %s: %s\n", path, strerror(errno));
        return GW_EXIT_FAILURE;
    }
    char entry[AUTH_PASSWD_HASH_MAX + 1100];
    entry[0] = '\0';
    if (!del) {
        char pw[MAX_PASSWORD], hash[AUTH_PASSWD_HASH_MAX];
        if (get_password(pw, sizeof pw) < 0) {
            free(old);
            return GW_EXIT_FAILURE;
        }
        int n = auth_passwd_hash((const uint8_t *)pw, strlen(pw), (unsigned)iterations, hash, sizeof hash);
        explicit_bzero(pw, sizeof pw);
        if (n < 0) {
            fprintf(stderr, "tributary passwd: cannot hash the password\n");
            free(old);
            return GW_EXIT_FAILURE;
        }
        snprintf(entry, sizeof entry, "%s:%s\n", user, hash);
    }
    /* every line but USER's, then USER's new one where the old one was (or at the end) */
    char *out = tb_malloc(len + strlen(entry) + 2);
    size_t olen = 0;
    bool placed = false, found = false;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(old + pos, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - (old + pos)) + 1 : len - pos;
        if (is_user_line(old + pos, l, user)) {
            found = true;
            if (!placed) {
                memcpy(out + olen, entry, strlen(entry));
                olen += strlen(entry);
                placed = true;
            }
        } else {
            memcpy(out + olen, old + pos, l);
            olen += l;
            if (!nl)
                out[olen++] = '\n';
        }
        pos += l;
    }
    if (!placed) {
        memcpy(out + olen, entry, strlen(entry));
        olen += strlen(entry);
    }
    free(old);
    int rc = GW_EXIT_OK;
    if (del && !found) {
        fprintf(stderr, "tributary passwd: %s has no user \"%s\"\n", path, user);
        rc = GW_EXIT_FAILURE;
    }
    auth_passwd_t *check = NULL;
    auth_error_t e;
    if (rc == GW_EXIT_OK && auth_passwd_parse(path, out, olen, &check, &e) < 0) {
        fprintf(stderr, "tributary passwd: the file would not load, left unchanged: %s\n", e.msg);
        rc = GW_EXIT_FAILURE;
    }
    auth_passwd_unref(check);
    struct stat st;
    mode_t mode = stat(path, &st) == 0 ? (st.st_mode & 07777) : 0600;
    if (rc == GW_EXIT_OK && write_atomically(path, out, olen, mode) < 0)
        rc = GW_EXIT_FAILURE;
    explicit_bzero(out, olen);
    free(out);
    return rc;
}
