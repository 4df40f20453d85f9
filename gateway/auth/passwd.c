/*
 * passwd.c: Mosquitto 2's password file (`user:$7$...` / `user:$6$...`,
 * as mosquitto_passwd writes it), parsed once into an immutable, reference
 * counted table, and the password check the CONNECT path runs on libuv's
 * thread pool.
 *
 * Stricter than Mosquitto where Mosquitto warns and carries on: a
 * duplicate user, a line without ':', a hash we cannot read is an error
 * naming its line, so a typo fails the (re)load instead of locking a user
 * out silently.
 *
 * No timing oracle: the digests are compared with CRYPTO_memcmp, and an
 * unknown user is hashed against a dummy entry of the kind and iteration
 * count most entries use, so "no such user" takes as long as "wrong
 * password".
 *
 * Ours rather than Mosquitto's: libmosquitto has no password code and the
 * broker's is not a library (auth.h).
 */
#include "gateway/auth/auth_int.h"

#include "base/base.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

typedef struct pw_entry {
    char *user;
    size_t user_len;
    unsigned line;
    auth__pw_kind_t kind;
    unsigned iterations; /* $7$ only */
    uint8_t salt[AUTH__SALT_LEN];
    uint8_t hash[AUTH__HASH_LEN];
} pw_entry_t;

struct auth_passwd {
    atomic_uint refs;
    size_t n;
    pw_entry_t *e; /* sorted by (user_len, bytes) */
    pw_entry_t dummy;
};

/* What an empty table (or NULL) hashes against. */
static const pw_entry_t default_dummy = { .kind = AUTH__PW_PBKDF2, .iterations = AUTH_PASSWD_DEFAULT_ITERATIONS };

static int cmp_entry(const void *a, const void *b)
{
    const pw_entry_t *x = a, *y = b;
    if (x->user_len != y->user_len)
        return x->user_len < y->user_len ? -1 : 1;
    int c = memcmp(x->user, y->user, x->user_len);
    if (c)
        return c;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* "$7$ITER$SALT$HASH" or "$6$SALT$HASH" into e; NULL or what is wrong. */
static const char *parse_hash(const char *h, size_t len, pw_entry_t *e)
{
    if (len < 3 || h[0] != '$' || (h[1] != '6' && h[1] != '7') || h[2] != '$')
        return memchr(h, '$', len) ? "unknown hash type (Mosquitto 2 writes $7$, 1.x $6$)"
                                   : "not a hash (a plain text password? mosquitto_passwd -U hashes them)";
    const char *p = h + 3, *end = h + len;
    e->kind = h[1] == '7' ? AUTH__PW_PBKDF2 : AUTH__PW_SHA512;
    if (e->kind == AUTH__PW_PBKDF2) {
        unsigned long long it = 0;
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9') {
            it = it * 10 + (unsigned)(*p - '0');
            if (it > INT_MAX)
                return "iteration count too large";
            p++;
        }
        if (p == d || p == end || *p != '$')
            return "malformed $7$ hash: no iteration count";
        if (it < 1)
            return "iteration count must be at least 1";
        e->iterations = (unsigned)it;
        p++;
    }
    const char *dollar = memchr(p, '$', (size_t)(end - p));
    if (!dollar)
        return "malformed hash: no '$' between salt and hash";
    if (!auth__b64_decode(p, (size_t)(dollar - p), e->salt, sizeof e->salt))
        return "malformed salt: not base64 of 12 bytes";
    p = dollar + 1;
    if (!auth__b64_decode(p, (size_t)(end - p), e->hash, sizeof e->hash))
        return "malformed hash: not base64 of 64 bytes";
    return NULL;
}

static void free_entries(pw_entry_t *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(e[i].user);
    free(e);
}

/* The kind and iteration count most entries use (of the first 64: a file
 * is written by one tool with one setting) become the dummy's. */
static void pick_dummy(auth_passwd_t *p)
{
    p->dummy = default_dummy;
    memset(p->dummy.salt, 0x5a, sizeof p->dummy.salt);
    size_t m = TB_MIN(p->n, (size_t)64), best = 0;
    for (size_t i = 0; i < m; i++) {
        size_t same = 0;
        for (size_t j = 0; j < m; j++)
            same += p->e[j].kind == p->e[i].kind && p->e[j].iterations == p->e[i].iterations;
        if (same > best) {
            best = same;
            p->dummy.kind = p->e[i].kind;
            p->dummy.iterations = p->e[i].iterations;
        }
    }
}

int auth_passwd_parse(const char *name, const char *text, size_t len, auth_passwd_t **out, auth_error_t *err)
{
    *out = NULL;
    size_t n = 0, cap = 0;
    pw_entry_t *e = NULL;
    auth__lines_t it;
    const char *line;
    size_t ll;
    auth__lines_init(&it, text, len);
    while (auth__lines_next(&it, &line, &ll)) {
        if (auth__line_skip(line, ll))
            continue;
        const char *why = NULL;
        const char *colon = memchr(line, ':', ll);
        size_t ul = colon ? (size_t)(colon - line) : 0;
        while (ul > 0 && (line[ul - 1] == ' ' || line[ul - 1] == '\t'))
            ul--;
        pw_entry_t ent = { .line = it.line };
        if (memchr(line, '\0', ll))
            why = "NUL byte in line";
        else if (!colon)
            why = "no ':' between user name and hash";
        else if (ul == 0)
            why = "empty user name";
        else {
            const char *h = colon + 1, *hend = line + ll;
            while (h < hend && (*h == ' ' || *h == '\t'))
                h++;
            why = parse_hash(h, (size_t)(hend - h), &ent);
        }
        if (why) {
            if (colon && ul)
                auth__error(err, name, it.line, "user \"%.*s\": %s", AUTH__EXCERPT(ul), line, why);
            else
                auth__error(err, name, it.line, "%s", why);
            free_entries(e, n);
            return -1;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            e = tb_realloc(e, cap * sizeof *e);
        }
        ent.user = tb_strndup(line, ul);
        ent.user_len = ul;
        e[n++] = ent;
    }
    if (n)
        qsort(e, n, sizeof *e, cmp_entry);
    /* The duplicate first seen in the file (the smallest second line). */
    const pw_entry_t *dup = NULL, *first = NULL;
    for (size_t i = 1; i < n; i++)
        if (e[i].user_len == e[i - 1].user_len && memcmp(e[i].user, e[i - 1].user, e[i].user_len) == 0 &&
            (!dup || e[i].line < dup->line)) {
            dup = &e[i];
            first = &e[i - 1];
        }
    if (dup) {
        while (first > e && first[-1].user_len == dup->user_len &&
               memcmp(first[-1].user, dup->user, dup->user_len) == 0)
            first--;
        auth__error(err, name, dup->line, "duplicate user \"%.*s\" (first on line %u)",
                    AUTH__EXCERPT(dup->user_len), dup->user, first->line);
        free_entries(e, n);
        return -1;
    }
    auth_passwd_t *p = tb_calloc(1, sizeof *p);
    atomic_init(&p->refs, 1);
    p->n = n;
    p->e = e;
    pick_dummy(p);
    *out = p;
    return 0;
}

int auth_passwd_load(const char *path, auth_passwd_t **out, auth_error_t *err)
{
    char *text;
    size_t len;
    *out = NULL;
    if (auth__read_file(path, &text, &len, err) < 0)
        return -1;
    int rc = auth_passwd_parse(path, text, len, out, err);
    OPENSSL_cleanse(text, len); /* hashes are secrets too */
    free(text);
    return rc;
}

auth_passwd_t *auth_passwd_ref(auth_passwd_t *p)
{
    if (p)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void auth_passwd_unref(auth_passwd_t *p)
{
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < p->n; i++)
        OPENSSL_cleanse(p->e[i].hash, sizeof p->e[i].hash);
    free_entries(p->e, p->n);
    free(p);
}

size_t auth_passwd_count(const auth_passwd_t *p)
{
    return p ? p->n : 0;
}

static const pw_entry_t *find(const auth_passwd_t *p, const char *user, size_t user_len)
{
    if (!p || !user || !p->n)
        return NULL;
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pw_entry_t *m = &p->e[mid];
        int c = m->user_len != user_len ? (m->user_len < user_len ? -1 : 1) : memcmp(m->user, user, user_len);
        if (c == 0)
            return m;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

auth_result_t auth_passwd_check(const auth_passwd_t *p, const char *user, size_t user_len, const uint8_t *password,
                                size_t password_len)
{
    const pw_entry_t *e = find(p, user, user_len);
    const pw_entry_t *use = e ? e : p ? &p->dummy : &default_dummy;
    uint8_t got[AUTH__HASH_LEN];
    bool ok = auth__pw_digest(use->kind, use->iterations, use->salt, password, password_len, got);
    /* Compared for the dummy too, so both paths do the same work. */
    int diff = CRYPTO_memcmp(got, use->hash, sizeof got);
    OPENSSL_cleanse(got, sizeof got);
    if (!e)
        return AUTH_NO_USER;
    return ok && diff == 0 ? AUTH_OK : AUTH_BAD_PASSWORD;
}
