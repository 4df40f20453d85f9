/* fuzz-lib: tb_auth */
/*
 * fuzz_acl_file.c: the acl_file parser reads a file an operator brought
 * from Mosquitto; it must refuse anything malformed with a message naming
 * a line, and never crash, leak or read out of bounds. A file it accepts
 * is then asked about a few clients (anonymous, plain, with '+' and '/' in
 * the names, and the users its own `user` lines name) and topics (fixed
 * ones and the last word of its first lines), and one invariant is held:
 * read and write asked together is granted exactly when each is.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/auth/auth.h"

#define MAX_WORDS 8
#define WORD_MAX 128

static char topics[MAX_WORDS + 4][WORD_MAX + 1];
static char users[4][WORD_MAX + 1];

static bool take(char *dst, const char *src, size_t len)
{
    if (len == 0 || len > WORD_MAX || memchr(src, '\0', len))
        return false;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return true;
}

/* Collects the last word of the first lines (topics) and the names of the first `user` lines. */
static void collect(const char *in, size_t size, size_t *nt, size_t *nu)
{
    size_t pos = 0;
    while (pos < size && *nt < MAX_WORDS) {
        const char *line = in + pos;
        const char *nl = memchr(line, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - line) : size - pos;
        pos += len + 1;
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
            len--;
        size_t s = len;
        while (s && line[s - 1] != ' ' && line[s - 1] != '\t')
            s--;
        if (*nu < 2 && len > 5 && memcmp(line, "user ", 5) == 0 && take(users[*nu], line + 5, len - 5))
            (*nu)++;
        if (take(topics[*nt], line + s, len - s))
            (*nt)++;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    auth_acl_t *a = NULL;
    auth_error_t err;
    memset(&err, 0xa5, sizeof err);
    if (auth_acl_parse("fuzz", in, size, &a, &err) != 0) {
        if (a || !memchr(err.msg, '\0', sizeof err.msg) || strncmp(err.msg, "fuzz:", 5) != 0 || err.line == 0)
            abort();
        return 0;
    }
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += in[i] == '\n';
    if (!a || auth_acl_rules(a) > lines)
        abort();

    size_t nt = 0, nu = 0;
    collect(in, size, &nt, &nu);
    static const char *const fixed[] = { "a/b", "$SYS/broker/version", "x", "/" };
    for (size_t i = 0; i < 4; i++)
        strcpy(topics[nt++], fixed[i]);
    const char *who[][2] = { { NULL, "c" }, { "u", "c" }, { "+", "c" }, { "u", "+" },
                             { "a/b", "c/d" }, { users[0], "c" }, { users[1], "+" } };
    size_t nwho = 5 + nu;
    for (size_t t = 0; t < nt; t++)
        for (size_t w = 0; w < nwho; w++) {
            const char *u = who[w][0], *c = who[w][1], *topic = topics[t];
            size_t tl = strlen(topic);
            bool r = auth_acl_allows(a, u, c, topic, tl, AUTH_ACL_READ);
            bool wr = auth_acl_allows(a, u, c, topic, tl, AUTH_ACL_WRITE);
            bool both = auth_acl_allows(a, u, c, topic, tl, (auth_access_t)(AUTH_ACL_READ | AUTH_ACL_WRITE));
            if (both != (r && wr))
                abort(); /* read and write asked together: both granted, by one rule or two */
        }
    auth_acl_t *b = auth_acl_ref(a);
    auth_acl_unref(a);
    auth_acl_unref(b);
    return 0;
}
