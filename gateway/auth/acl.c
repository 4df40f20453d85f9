/*
 * acl.c: Mosquitto's acl_file, parsed once into an immutable, reference
 * counted table, and the check the broker runs per PUBLISH (write) and
 * per delivery (read).
 *
 * The file, as Mosquitto 2 reads it (mosquitto.conf(5), acl_file):
 *   topic [read|write|readwrite|deny] TOPIC   one rule for the current section
 *   user NAME                                 starts NAME's section (the rest of
 *                                             the line, spaces included)
 *   pattern [read|write|readwrite|deny] TOPIC one rule for every client
 * The section before the first `user` line is the anonymous clients'. The
 * access word is optional (readwrite) unless TOPIC holds a space; a lone
 * word after `topic` is the topic, even "read". A user named twice has the
 * rules of both sections. An unknown keyword, an unknown access word or an
 * invalid filter is an error naming its line, as in Mosquitto 2.
 *
 * The check, and where it differs from Mosquitto 2.0 (always by refusing
 * more, never less):
 *   - a matching `deny` anywhere (the client's section or a pattern) wins.
 *     Mosquitto checks the client's section first, so there a section
 *     grant beats a pattern deny (seen with mosquitto 2.0.11: `topic
 *     readwrite data/#` in bob's section, `pattern deny data/%u/secret`,
 *     bob may publish data/bob/secret). Here bob may not.
 *   - a pattern holding %u never matches a client without a user name;
 *     one holding %u or %c never matches an empty one.
 *   - a client whose user name or client id holds '+', '#' or '/' gets no
 *     grant from any pattern line, and patterns that would substitute that
 *     value do not apply to it (CVE-2017-7650: user "+" and `pattern read
 *     %u/#` must not read everyone's topics). Mosquitto 2.0 refuses such
 *     clients in its pattern pass for '+' and '#' ("ACL denying access to
 *     client with dangerous username"); it substitutes a '/' as text, and
 *     user "a/b" then writes dev/a/b/x under `pattern write dev/%u/#`. Here
 *     it does not: a value never spans levels.
 *   - nothing granted is denied; an empty file denies everything.
 *
 * Ours rather than Mosquitto's: libmosquitto has no ACL code and the
 * broker's is not a library (auth.h).
 */
#include "gateway/auth/auth_int.h"

#include "base/base.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct acl_rule {
    char *filter;
    size_t len;
    unsigned access; /* AUTH_ACL_READ | AUTH_ACL_WRITE bits; 0 is deny */
    bool uses_u, uses_c;
} acl_rule_t;

/* Denies first (n_deny of them), then grants. */
typedef struct acl_list {
    acl_rule_t *r;
    size_t n, cap, n_deny;
} acl_list_t;

typedef struct acl_user {
    char *name;
    size_t order; /* of its first `user` line, for a stable merge */
    acl_list_t rules;
} acl_user_t;

struct auth_acl {
    atomic_uint refs;
    size_t n_rules;
    acl_list_t anon;
    acl_list_t patterns;
    acl_user_t *users; /* sorted by name, each once */
    size_t n_users;
};

static void list_add(acl_list_t *l, acl_rule_t r)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->r = tb_realloc(l->r, l->cap * sizeof *l->r);
    }
    l->r[l->n++] = r;
}

static void list_free(acl_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->r[i].filter);
    free(l->r);
}

/* Moves the denies to the front, keeping the file's order otherwise. */
static void list_finish(acl_list_t *l)
{
    acl_rule_t *sorted = tb_malloc((l->n ? l->n : 1) * sizeof *sorted);
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (!l->r[i].access)
            sorted[k++] = l->r[i];
    l->n_deny = k;
    for (size_t i = 0; i < l->n; i++)
        if (l->r[i].access)
            sorted[k++] = l->r[i];
    free(l->r);
    l->r = sorted;
    l->cap = l->n;
}

static int cmp_user(const void *a, const void *b)
{
    const acl_user_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static void acl_free(auth_acl_t *a)
{
    list_free(&a->anon);
    list_free(&a->patterns);
    for (size_t i = 0; i < a->n_users; i++) {
        free(a->users[i].name);
        list_free(&a->users[i].rules);
    }
    free(a->users);
    free(a);
}

/* Sorts the sections by name and merges a user's sections into one. */
static void merge_users(auth_acl_t *a)
{
    if (a->n_users)
        qsort(a->users, a->n_users, sizeof *a->users, cmp_user);
    size_t w = 0;
    for (size_t i = 0; i < a->n_users; i++) {
        acl_user_t *u = &a->users[i];
        if (w && strcmp(a->users[w - 1].name, u->name) == 0) {
            acl_list_t *into = &a->users[w - 1].rules;
            for (size_t k = 0; k < u->rules.n; k++)
                list_add(into, u->rules.r[k]);
            free(u->rules.r);
            free(u->name);
            continue;
        }
        a->users[w++] = *u;
    }
    a->n_users = w;
    for (size_t i = 0; i < a->n_users; i++)
        list_finish(&a->users[i].rules);
    list_finish(&a->anon);
    list_finish(&a->patterns);
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The next word of [*p, end) and the blanks after it. */
static size_t word(const char **p, const char *end, const char **w)
{
    const char *s = *p, *e = s;
    while (e < end && !blank(*e))
        e++;
    *w = s;
    *p = e;
    while (*p < end && blank(**p))
        (*p)++;
    return (size_t)(e - s);
}

static bool is(const char *w, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(w, lit, n) == 0;
}

/* One topic or pattern line's rest into r; NULL or what is wrong. */
static const char *parse_rule(const char *p, const char *end, bool pattern, acl_rule_t *r, const char **bad,
                              size_t *bad_len)
{
    const char *w1;
    size_t n1 = word(&p, end, &w1);
    if (n1 == 0)
        return "no topic";
    const char *topic = p;
    r->access = AUTH_ACL_READ | AUTH_ACL_WRITE;
    if (p == end) { /* a lone word is the topic */
        topic = w1;
    } else if (is(w1, n1, "read")) {
        r->access = AUTH_ACL_READ;
    } else if (is(w1, n1, "write")) {
        r->access = AUTH_ACL_WRITE;
    } else if (is(w1, n1, "deny")) {
        r->access = 0;
    } else if (!is(w1, n1, "readwrite")) {
        *bad = w1;
        *bad_len = n1;
        return "unknown access (read, write, readwrite or deny; a topic with a space needs one)";
    }
    size_t tlen = (size_t)(end - topic);
    const char *why = auth__filter_invalid(topic, tlen);
    if (why) {
        *bad = topic;
        *bad_len = tlen;
        return why;
    }
    r->filter = tb_strndup(topic, tlen);
    r->len = tlen;
    r->uses_u = pattern && memmem(topic, tlen, "%u", 2);
    r->uses_c = pattern && memmem(topic, tlen, "%c", 2);
    return NULL;
}

int auth_acl_parse(const char *name, const char *text, size_t len, auth_acl_t **out, auth_error_t *err)
{
    *out = NULL;
    auth_acl_t *a = tb_calloc(1, sizeof *a);
    atomic_init(&a->refs, 1);
    acl_list_t *section = &a->anon;
    size_t users_cap = 0;
    auth__lines_t it;
    const char *line;
    size_t ll;
    auth__lines_init(&it, text, len);
    while (auth__lines_next(&it, &line, &ll)) {
        if (auth__line_skip(line, ll))
            continue;
        if (memchr(line, '\0', ll)) {
            auth__error(err, name, it.line, "NUL byte in line");
            goto fail;
        }
        const char *p = line, *end = line + ll, *kw;
        size_t kl = word(&p, end, &kw);
        if (is(kw, kl, "user")) {
            if (p == end) {
                auth__error(err, name, it.line, "`user` without a user name");
                goto fail;
            }
            if (a->n_users == users_cap) {
                users_cap = users_cap ? users_cap * 2 : 8;
                a->users = tb_realloc(a->users, users_cap * sizeof *a->users);
            }
            a->users[a->n_users] = (acl_user_t){ .name = tb_strndup(p, (size_t)(end - p)), .order = a->n_users };
            section = &a->users[a->n_users++].rules;
            continue;
        }
        bool pattern = is(kw, kl, "pattern");
        if (!pattern && !is(kw, kl, "topic")) {
            auth__error(err, name, it.line, "unknown keyword \"%.*s\" (topic, pattern or user)", AUTH__EXCERPT(kl),
                        kw);
            goto fail;
        }
        acl_rule_t r = { 0 };
        const char *bad = NULL;
        size_t bad_len = 0;
        const char *why = parse_rule(p, end, pattern, &r, &bad, &bad_len);
        if (why) {
            if (bad)
                auth__error(err, name, it.line, "\"%.*s\": %s", AUTH__EXCERPT(bad_len), bad, why);
            else
                auth__error(err, name, it.line, "`%s` line: %s", pattern ? "pattern" : "topic", why);
            goto fail;
        }
        list_add(pattern ? &a->patterns : section, r);
        a->n_rules++;
    }
    merge_users(a);
    *out = a;
    return 0;
fail:
    acl_free(a);
    return -1;
}

int auth_acl_load(const char *path, auth_acl_t **out, auth_error_t *err)
{
    char *text;
    size_t len;
    *out = NULL;
    if (auth__read_file(path, &text, &len, err) < 0)
        return -1;
    int rc = auth_acl_parse(path, text, len, out, err);
    free(text);
    return rc;
}

auth_acl_t *auth_acl_ref(auth_acl_t *a)
{
    if (a)
        atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    return a;
}

void auth_acl_unref(auth_acl_t *a)
{
    if (a && atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1)
        acl_free(a);
}

size_t auth_acl_rules(const auth_acl_t *a)
{
    return a ? a->n_rules : 0;
}

static const acl_list_t *section_of(const auth_acl_t *a, const char *user)
{
    if (!user)
        return &a->anon;
    size_t lo = 0, hi = a->n_users;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(a->users[mid].name, user);
        if (c == 0)
            return &a->users[mid].rules;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL; /* a user with no section: patterns only */
}

/* What a client may substitute for %u / %c. */
typedef struct who {
    const char *user, *client_id;
    bool no_u, no_c;   /* the pattern referencing it does not apply */
    bool dangerous;    /* '+', '#' or '/' in either: no pattern grants */
} who_t;

static bool pattern_applies(const acl_rule_t *r, const who_t *w)
{
    return !(r->uses_u && w->no_u) && !(r->uses_c && w->no_c);
}

bool auth_acl_allows(const auth_acl_t *a, const char *user, const char *client_id, const char *topic, size_t tlen,
                     auth_access_t access)
{
    unsigned want = (unsigned)access & (AUTH_ACL_READ | AUTH_ACL_WRITE);
    if (!a || !want || !topic || tlen == 0 || memchr(topic, '+', tlen) || memchr(topic, '#', tlen))
        return false;
    bool bad_u = user && strpbrk(user, "+#/");
    bool bad_c = client_id && strpbrk(client_id, "+#/");
    who_t w = {
        .user = user,
        .client_id = client_id,
        .no_u = !user || !*user || bad_u,
        .no_c = !client_id || !*client_id || bad_c,
        .dangerous = bad_u || bad_c,
    };
    const acl_list_t *own = section_of(a, user);
    const acl_list_t *pat = &a->patterns;

    /* Denies first, from both. */
    for (size_t i = 0; own && i < own->n_deny; i++)
        if (auth__filter_match(own->r[i].filter, own->r[i].len, topic, tlen, false, NULL, NULL))
            return false;
    for (size_t i = 0; i < pat->n_deny; i++)
        if (pattern_applies(&pat->r[i], &w) &&
            auth__filter_match(pat->r[i].filter, pat->r[i].len, topic, tlen, true, user, client_id))
            return false;

    unsigned granted = 0;
    for (size_t i = own ? own->n_deny : 0; own && i < own->n; i++)
        if ((own->r[i].access & want & ~granted) &&
            auth__filter_match(own->r[i].filter, own->r[i].len, topic, tlen, false, NULL, NULL)) {
            granted |= own->r[i].access;
            if ((granted & want) == want)
                return true;
        }
    if (w.dangerous)
        return false;
    for (size_t i = pat->n_deny; i < pat->n; i++)
        if ((pat->r[i].access & want & ~granted) && pattern_applies(&pat->r[i], &w) &&
            auth__filter_match(pat->r[i].filter, pat->r[i].len, topic, tlen, true, user, client_id)) {
            granted |= pat->r[i].access;
            if ((granted & want) == want)
                return true;
        }
    return false;
}
