/*
 * sch_json_uri.c: URI reference resolution and JSON Pointers for $id/$ref.
 *
 * JSON Schema identifies schemas by URI: "$id" changes the base URI and
 * "$ref" is resolved against it (RFC 3986 section 5.2, including
 * remove_dot_segments), then the fragment is either a JSON Pointer (RFC 6901,
 * percent-decoded first, then ~1 -> '/' and ~0 -> '~') or a plain-name
 * anchor. Only string work happens here: which document a URI names is
 * sch_json_ref.c's business. No normalisation beyond the RFC's algorithm
 * (no case folding, no default ports): two spellings of one URI are two URIs,
 * which is what the suite and the common validators expect.
 */
#include "schema/sch_json.h"

#include <string.h>

#include "base/base.h"

/* The five components of RFC 3986 section 3; absent ones have p == NULL. */
typedef struct {
    const char *p;
    size_t n;
} span_t;

typedef struct {
    span_t scheme, authority, path, query, fragment;
} uri_parts_t;

static void uri_split(const char *s, uri_parts_t *u)
{
    memset(u, 0, sizeof *u);
    size_t len = strlen(s), i = 0;
    /* scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
    size_t k = 0;
    while (k < len && (((s[k] | 0x20) >= 'a' && (s[k] | 0x20) <= 'z') ||
                       (k > 0 && ((s[k] >= '0' && s[k] <= '9') || s[k] == '+' ||
                                  s[k] == '-' || s[k] == '.'))))
        k++;
    if (k > 0 && k < len && s[k] == ':') {
        u->scheme = (span_t){ s, k };
        i = k + 1;
    }
    if (len - i >= 2 && s[i] == '/' && s[i + 1] == '/') {
        size_t a = i + 2, e = a;
        while (e < len && s[e] != '/' && s[e] != '?' && s[e] != '#') e++;
        u->authority = (span_t){ s + a, e - a };
        i = e;
    }
    size_t e = i;
    while (e < len && s[e] != '?' && s[e] != '#') e++;
    u->path = (span_t){ s + i, e - i };
    i = e;
    if (i < len && s[i] == '?') {
        e = i + 1;
        while (e < len && s[e] != '#') e++;
        u->query = (span_t){ s + i + 1, e - i - 1 };
        i = e;
    }
    if (i < len && s[i] == '#') u->fragment = (span_t){ s + i + 1, len - i - 1 };
}

/* A growing output string. */
typedef struct {
    char *p;
    size_t n, cap;
} buf_t;

static void buf_put(buf_t *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = tb_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* RFC 3986 5.2.4 remove_dot_segments, appending the result to out. */
static void remove_dots(const char *in, size_t n, buf_t *out)
{
    size_t start = out->n;
    size_t i = 0;
    while (i < n) {
        const char *p = in + i;
        size_t rest = n - i;
        if (rest >= 3 && memcmp(p, "../", 3) == 0) { i += 3; continue; }
        if (rest >= 2 && memcmp(p, "./", 2) == 0) { i += 2; continue; }
        if (rest >= 3 && memcmp(p, "/./", 3) == 0) { i += 2; continue; }
        if (rest == 2 && memcmp(p, "/.", 2) == 0) { buf_put(out, "/", 1); break; }
        if ((rest >= 4 && memcmp(p, "/../", 4) == 0) || (rest == 3 && memcmp(p, "/..", 3) == 0)) {
            /* drop the last output segment */
            while (out->n > start && out->p[out->n - 1] != '/') out->n--;
            if (out->n > start) out->n--;
            out->p[out->n] = '\0';
            if (rest == 3) { buf_put(out, "/", 1); break; }
            i += 3;
            continue;
        }
        if ((rest == 1 && p[0] == '.') || (rest == 2 && memcmp(p, "..", 2) == 0)) break;
        /* move the first segment (with its leading '/', if any) to out */
        size_t e = (p[0] == '/') ? 1 : 0;
        while (e < rest && p[e] != '/') e++;
        buf_put(out, p, e);
        i += e;
    }
}

char *sch__json_uri_resolve(const char *base, const char *ref)
{
    uri_parts_t b, r;
    uri_split(base, &b);
    uri_split(ref, &r);
    buf_t out = { 0 };
    buf_put(&out, "", 0);
    const span_t *scheme, *auth, *query;
    buf_t path = { 0 };
    buf_put(&path, "", 0);
    if (r.scheme.p) {
        scheme = &r.scheme;
        auth = &r.authority;
        remove_dots(r.path.p, r.path.n, &path);
        query = &r.query;
    } else {
        scheme = &b.scheme;
        if (r.authority.p) {
            auth = &r.authority;
            remove_dots(r.path.p, r.path.n, &path);
            query = &r.query;
        } else {
            auth = &b.authority;
            if (r.path.n == 0) {
                buf_put(&path, b.path.p ? b.path.p : "", b.path.n);
                query = r.query.p ? &r.query : &b.query;
            } else {
                if (r.path.p[0] == '/') {
                    remove_dots(r.path.p, r.path.n, &path);
                } else {
                    /* 5.2.3 merge */
                    buf_t merged = { 0 };
                    buf_put(&merged, "", 0);
                    if (b.authority.p && b.path.n == 0) {
                        buf_put(&merged, "/", 1);
                    } else {
                        size_t k = b.path.n;
                        while (k > 0 && b.path.p[k - 1] != '/') k--;
                        buf_put(&merged, b.path.p ? b.path.p : "", k);
                    }
                    buf_put(&merged, r.path.p, r.path.n);
                    remove_dots(merged.p, merged.n, &path);
                    free(merged.p);
                }
                query = &r.query;
            }
        }
    }
    if (scheme->p) {
        buf_put(&out, scheme->p, scheme->n);
        buf_put(&out, ":", 1);
    }
    if (auth->p) {
        buf_put(&out, "//", 2);
        buf_put(&out, auth->p, auth->n);
    }
    buf_put(&out, path.p, path.n);
    free(path.p);
    if (query->p) {
        buf_put(&out, "?", 1);
        buf_put(&out, query->p, query->n);
    }
    if (r.fragment.p) {
        buf_put(&out, "#", 1);
        buf_put(&out, r.fragment.p, r.fragment.n);
    }
    return out.p;
}

size_t sch__json_uri_nofrag_len(const char *uri)
{
    const char *h = strchr(uri, '#');
    return h ? (size_t)(h - uri) : strlen(uri);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
    return -1;
}

char *sch__json_pct_decode(const char *s, size_t len, size_t *outlen)
{
    char *out = tb_malloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        int h = i + 2 < len ? hexval(s[i + 1]) : -1;
        int l = i + 2 < len ? hexval(s[i + 2]) : -1;
        if (h < 0 || l < 0) {
            free(out);
            return NULL;
        }
        out[o++] = (char)(h * 16 + l);
        i += 2;
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

/* Unescapes one reference token (~1 -> '/', ~0 -> '~') into tok; false on a
 * stray '~'. */
static bool pointer_token(const char *p, size_t n, char *tok, size_t *toklen)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '~') {
            tok[o++] = p[i];
            continue;
        }
        if (i + 1 >= n || (p[i + 1] != '0' && p[i + 1] != '1')) return false;
        tok[o++] = p[i + 1] == '0' ? '~' : '/';
        i++;
    }
    *toklen = o;
    return true;
}

/* An array index token: "0" or digits without a leading zero. */
static bool pointer_index(const char *t, size_t n, size_t *idx)
{
    if (n == 0 || n > 18 || (n > 1 && t[0] == '0')) return false;
    size_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') return false;
        v = v * 10 + (size_t)(t[i] - '0');
    }
    *idx = v;
    return true;
}

json_t *sch__json_pointer_get(json_t *root, const char *ptr, size_t len)
{
    if (len == 0) return root;
    if (ptr[0] != '/') return NULL;
    char *tok = tb_malloc(len + 1);
    json_t *cur = root;
    size_t i = 1;
    for (;;) {
        size_t e = i;
        while (e < len && ptr[e] != '/') e++;
        size_t tl;
        if (!pointer_token(ptr + i, e - i, tok, &tl)) {
            cur = NULL;
            break;
        }
        size_t idx;
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, tok, tl);
        } else if (json_is_array(cur) && pointer_index(tok, tl, &idx)) {
            cur = json_array_get(cur, idx);
        } else {
            cur = NULL;
        }
        if (!cur || e >= len) break;
        i = e + 1;
    }
    free(tok);
    return cur;
}
