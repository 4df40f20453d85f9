/* fuzz-lib: tb_auth */
/*
 * fuzz_passwd_file.c: the password file parser reads a file an operator
 * brought from Mosquitto; it must refuse anything malformed with a message
 * naming a line, and never crash, leak or read out of bounds. A file it
 * accepts is then checked against: the first user name in the input and
 * two others, each with two passwords.
 *
 * PBKDF2 is slow by design, so the checks run only when every "$7$"
 * iteration count in the input is at most 1000 (a superset of what the
 * parser reads: it only reads counts right after "$7$").
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/auth/auth.h"

static bool iterations_small(const char *in, size_t size)
{
    for (size_t i = 0; i + 3 <= size; i++) {
        if (memcmp(in + i, "$7$", 3) != 0)
            continue;
        unsigned long long it = 0;
        for (size_t j = i + 3; j < size && in[j] >= '0' && in[j] <= '9'; j++)
            if ((it = it * 10 + (unsigned)(in[j] - '0')) > 1000)
                return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    auth_passwd_t *p = NULL;
    auth_error_t err;
    memset(&err, 0xa5, sizeof err);
    if (auth_passwd_parse("fuzz", in, size, &p, &err) != 0) {
        if (p || !memchr(err.msg, '\0', sizeof err.msg) || strncmp(err.msg, "fuzz:", 5) != 0 || err.line == 0)
            abort();
        return 0;
    }
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += in[i] == '\n';
    if (!p || auth_passwd_count(p) > lines)
        abort();
    if (iterations_small(in, size)) {
        /* The first user name: the text before the first ':', blanks trimmed. */
        const char *colon = memchr(in, ':', size);
        size_t s = 0, e = colon ? (size_t)(colon - in) : 0;
        while (s < e && (in[s] == ' ' || in[s] == '\t' || in[s] == '\n' || in[s] == '\r'))
            s++;
        while (e > s && (in[e - 1] == ' ' || in[e - 1] == '\t'))
            e--;
        const struct {
            const char *u;
            size_t n;
        } users[] = { { in + s, e - s }, { "alice", 5 }, { "", 0 } };
        for (size_t i = 0; i < sizeof users / sizeof users[0]; i++) {
            auth_result_t r1 = auth_passwd_check(p, users[i].u, users[i].n, (const uint8_t *)"x", 1);
            auth_result_t r2 = auth_passwd_check(p, users[i].u, users[i].n, data, size);
            if ((r1 == AUTH_NO_USER) != (r2 == AUTH_NO_USER))
                abort(); /* the user exists or not, whatever the password */
        }
    }
    auth_passwd_t *q = auth_passwd_ref(p);
    auth_passwd_unref(p);
    auth_passwd_unref(q);
    return 0;
}
