/*
 * router_out.c: output topic templates (an MQTT output's remote_topic, a
 * Sparkplug output's device) and MQTT topic filters (an output's topics).
 *
 * A template is compiled once, when the configuration is loaded, into a
 * list of pieces: literal slices of an owned copy, and placeholders. Every
 * check that decides whether an expansion can be an invalid MQTT topic name
 * happens here, so the message path only copies bytes: a literal was
 * checked for '+', '#', NUL and UTF-8 at compile; ${topic} is a topic name
 * the codec validated; ${upstream} is a Danube topic (letters, digits, '_',
 * '-', '/'); ${N} is one level of a valid topic name (no '/', '+', '#'); ${#}
 * is levels of one. Only an attribute's value comes from outside the
 * router's knowledge at expand time, so it alone is checked per message
 * (it must hold no wildcard, no NUL and be UTF-8, as the capture that
 * extract_attributes took it from does). Pieces that can all be empty are
 * refused, since an MQTT topic name has at least one byte; except for one
 * level (a Sparkplug device: "${1}" is the issue's own example), where an
 * empty expansion is refused per message (ROUTER_OUT_EVALUE).
 *
 * See docs/design/OUTPUTS.md 4.2.
 */
#include "gateway/router/router_int.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q "%.80s"

typedef enum piece_kind {
    P_LIT,
    P_TOPIC,
    P_UPSTREAM,
    P_CAP,  /* ${N} */
    P_REST, /* ${#} */
    P_ATTR,
} piece_kind_t;

typedef struct piece {
    piece_kind_t kind;
    uint32_t off; /* literal or attribute name: offset in text */
    uint32_t len;
    uint32_t cap; /* P_CAP: 1-based */
} piece_t;

struct router_out {
    char *text; /* owned copy of the template */
    piece_t *pieces;
    size_t n;
    bool needs_match;
};

static void out_err(char *err, size_t errlen, const char *tmpl, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void out_err(char *err, size_t errlen, const char *tmpl, size_t col, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    int n = snprintf(err, errlen, "template \"" Q "\" column %zu: ", tmpl, col);
    if (n < 0 || (size_t)n >= errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Checks literal text s[0..len) (starting at column col): no wildcard, no
 * NUL (cannot occur in a C string), no '/' for a level, valid UTF-8. */
static int lit_check(const char *tmpl, const char *s, size_t len, size_t col, unsigned flags, char *err,
                     size_t errlen)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '+' || s[i] == '#') {
            out_err(err, errlen, tmpl, col + i, "'%c' in literal text: a topic name cannot hold a wildcard",
                    s[i]);
            return TB_ECONFIG;
        }
        if (s[i] == '/' && (flags & ROUTER_OUT_LEVEL)) {
            out_err(err, errlen, tmpl, col + i, "'/' in literal text: the value must be one topic level");
            return TB_ECONFIG;
        }
    }
    if (!tb_utf8_valid((const uint8_t *)s, len)) {
        out_err(err, errlen, tmpl, col, "literal text is not valid UTF-8");
        return TB_ECONFIG;
    }
    return 0;
}

/* Parses the placeholder name inside ${...} into p. */
static int name_parse(const char *tmpl, const char *name, size_t len, size_t col, unsigned flags, piece_t *p,
                      char *err, size_t errlen)
{
    bool level = flags & ROUTER_OUT_LEVEL;
    if (len == 5 && memcmp(name, "topic", 5) == 0)
        p->kind = P_TOPIC;
    else if (len == 8 && memcmp(name, "upstream", 8) == 0)
        p->kind = P_UPSTREAM;
    else if (len == 1 && name[0] == '#')
        p->kind = P_REST;
    else if (len > 5 && memcmp(name, "attr.", 5) == 0) {
        p->kind = P_ATTR;
        p->off = (uint32_t)(name - tmpl) + 5;
        p->len = (uint32_t)len - 5;
    } else if (len >= 1 && name[0] >= '1' && name[0] <= '9') {
        uint32_t v = 0;
        for (size_t i = 0; i < len; i++) {
            if (name[i] < '0' || name[i] > '9' || v > ROUTER_MAX_CAPTURES) {
                v = UINT32_MAX;
                break;
            }
            v = v * 10 + (uint32_t)(name[i] - '0');
        }
        if (v == UINT32_MAX || v > ROUTER_MAX_CAPTURES) {
            out_err(err, errlen, tmpl, col, "${%.*s}: a capture is ${1}..${%d}", (int)(len > 40 ? 40 : len),
                    name, ROUTER_MAX_CAPTURES);
            return TB_ECONFIG;
        }
        p->kind = P_CAP;
        p->cap = v;
    } else {
        out_err(err, errlen, tmpl, col,
                "unknown placeholder ${%.*s}: use ${topic}, ${upstream}, ${1}.., ${#} or ${attr.NAME}",
                (int)(len > 40 ? 40 : len), name);
        return TB_ECONFIG;
    }
    if (level && p->kind != P_CAP) {
        out_err(err, errlen, tmpl, col, "${%.*s} is not allowed here: a one-level value takes only ${1}.. "
                "and literal text", (int)(len > 40 ? 40 : len), name);
        return TB_ECONFIG;
    }
    return 0;
}

static bool rule_has_attr(const router__rule_t *rule, const char *name, size_t len)
{
    for (size_t i = 0; i < rule->n_attrs; i++)
        if (strlen(rule->attrs[i].name) == len && memcmp(rule->attrs[i].name, name, len) == 0)
            return true;
    return false;
}

/* Checks placeholder p against one rule. */
static int rule_check(const char *tmpl, const piece_t *p, size_t col, const router__rule_t *rule, size_t ri,
                      char *err, size_t errlen)
{
    if (p->kind == P_CAP && p->cap > rule->n_plus) {
        out_err(err, errlen, tmpl, col, "${%u}: rule %zu (\"" Q "\") has %u '+' capture%s", p->cap, ri,
                rule->pattern, rule->n_plus, rule->n_plus == 1 ? "" : "s");
        return TB_ECONFIG;
    }
    if (p->kind == P_REST && !rule->ends_hash) {
        out_err(err, errlen, tmpl, col, "${#}: rule %zu (\"" Q "\") does not end in '#'", ri, rule->pattern);
        return TB_ECONFIG;
    }
    if (p->kind == P_ATTR && !rule_has_attr(rule, tmpl + p->off, p->len)) {
        out_err(err, errlen, tmpl, col,
                "${attr.%.*s} is not an extract_attributes name of rule %zu (\"" Q "\"); "
                "another attribute could produce an invalid topic",
                (int)(p->len > 40 ? 40 : p->len), tmpl + p->off, ri, rule->pattern);
        return TB_ECONFIG;
    }
    return 0;
}

int router_out_compile(const router_t *r, const char *tmpl, const uint32_t *rules, size_t nrules,
                          unsigned flags, router_out_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!tmpl || !*tmpl) {
        out_err(err, errlen, tmpl ? tmpl : "", 1, "the template is empty");
        return TB_ECONFIG;
    }
    size_t tlen = strlen(tmpl);
    if (tlen > ROUTER_OUT_MAX) {
        out_err(err, errlen, tmpl, 1, "longer than %u bytes", ROUTER_OUT_MAX);
        return TB_ECONFIG;
    }
    router_out_t *t = tb_calloc(1, sizeof *t);
    t->text = tb_strdup(tmpl);
    t->pieces = tb_calloc(tlen + 1, sizeof *t->pieces); /* at most one piece per byte */
    size_t *cols = tb_calloc(tlen + 1, sizeof *cols);
    bool never_empty = false;
    const char *s = t->text;
    size_t i = 0;
    int rc = 0;
    while (i < tlen && rc == 0) {
        if (s[i] == '$' && s[i + 1] == '{') {
            const char *close = strchr(s + i + 2, '}');
            if (!close) {
                out_err(err, errlen, tmpl, i + 1, "'${' without a closing '}'");
                rc = TB_ECONFIG;
                break;
            }
            piece_t p = { 0 };
            const char *name = s + i + 2;
            size_t nlen = (size_t)(close - name);
            if (memchr(name, '{', nlen)) {
                out_err(err, errlen, tmpl, i + 1, "'${' inside a placeholder");
                rc = TB_ECONFIG;
                break;
            }
            rc = name_parse(s, name, nlen, i + 1, flags, &p, err, errlen);
            if (rc == 0 && p.kind == P_ATTR && !tb_utf8_valid((const uint8_t *)name + 5, nlen - 5)) {
                out_err(err, errlen, tmpl, i + 8, "attribute name is not valid UTF-8");
                rc = TB_ECONFIG;
            }
            if (rc)
                break;
            if (p.kind == P_TOPIC || p.kind == P_UPSTREAM)
                never_empty = true;
            if (p.kind == P_CAP || p.kind == P_REST)
                t->needs_match = true;
            cols[t->n] = i + 1;
            t->pieces[t->n++] = p;
            i = (size_t)(close - s) + 1;
        } else {
            size_t start = i;
            while (i < tlen && !(s[i] == '$' && s[i + 1] == '{'))
                i++;
            rc = lit_check(tmpl, s + start, i - start, start + 1, flags, err, errlen);
            if (rc)
                break;
            never_empty = true;
            cols[t->n] = start + 1;
            t->pieces[t->n++] = (piece_t){ .kind = P_LIT, .off = (uint32_t)start, .len = (uint32_t)(i - start) };
        }
    }
    if (rc == 0 && !never_empty && !(flags & ROUTER_OUT_LEVEL)) {
        out_err(err, errlen, tmpl, 1,
                "every piece can be empty (a capture, ${#} or an attribute), and a topic cannot be: "
                "add literal text, ${topic} or ${upstream}");
        rc = TB_ECONFIG;
    }
    if (rc == 0 && r) {
        size_t nr = rules ? nrules : r->n_rules;
        for (size_t k = 0; k < nr && rc == 0; k++) {
            size_t ri = rules ? rules[k] : k;
            if (ri >= r->n_rules) {
                out_err(err, errlen, tmpl, 1, "rule %zu does not exist", ri);
                rc = TB_ECONFIG;
                break;
            }
            for (size_t j = 0; j < t->n && rc == 0; j++)
                rc = rule_check(tmpl, &t->pieces[j], cols[j], &r->rules[ri], ri, err, errlen);
        }
    }
    free(cols);
    if (rc) {
        router_out_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void router_out_free(router_out_t *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->pieces);
    free(t);
}

bool router_out_needs_match(const router_out_t *t)
{
    return t->needs_match;
}

/* An attribute's value must be valid in a topic name, as the capture that
 * extract_attributes took it from is: levels without wildcards, UTF-8. */
static bool value_valid(router_slice_t v)
{
    for (size_t i = 0; i < v.len; i++)
        if (v.p[i] == '+' || v.p[i] == '#' || v.p[i] == '\0')
            return false;
    return tb_utf8_valid((const uint8_t *)v.p, v.len);
}

int router_out_expand(const router_out_t *t, const router_out_ctx_t *c, char *buf, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const piece_t *p = &t->pieces[i];
        router_slice_t v;
        switch (p->kind) {
        case P_LIT: v = (router_slice_t){ t->text + p->off, p->len }; break;
        case P_TOPIC: v = c->topic; break;
        case P_UPSTREAM: v = c->upstream; break;
        case P_CAP:
            if (!c->m || c->m->rule < 0 || p->cap > c->m->n_caps)
                return ROUTER_OUT_EVALUE;
            v = c->m->caps[p->cap - 1];
            break;
        case P_REST:
            if (!c->m || c->m->rule < 0 || !c->m->has_rest)
                return ROUTER_OUT_EVALUE;
            v = c->m->rest;
            break;
        case P_ATTR:
            if (!c->attr || !c->attr(c->arg, t->text + p->off, p->len, &v) || !value_valid(v))
                return ROUTER_OUT_EVALUE;
            break;
        default: return ROUTER_OUT_EVALUE;
        }
        if (v.len > cap - n)
            return ROUTER_OUT_ETOOLONG;
        if (v.len)
            memcpy(buf + n, v.p, v.len);
        n += v.len;
    }
    if (n == 0)
        return ROUTER_OUT_EVALUE;
    if (n > ROUTER_OUT_MAX)
        return ROUTER_OUT_ETOOLONG;
    return (int)n;
}

/* ---- filters ------------------------------------------------------------- */

int router_filter_check(const char *filter, char *err, size_t errlen)
{
    if (!filter || !*filter) {
        if (err && errlen)
            snprintf(err, errlen, "topic filter is empty");
        return TB_ECONFIG;
    }
    size_t len = strlen(filter);
    if (len > ROUTER_OUT_MAX || !tb_utf8_valid((const uint8_t *)filter, len)) {
        if (err && errlen)
            snprintf(err, errlen, "topic filter \"" Q "\" is not valid UTF-8 of at most %u bytes", filter,
                     ROUTER_OUT_MAX);
        return TB_ECONFIG;
    }
    for (size_t i = 0; i < len; i++) {
        char ch = filter[i];
        if (ch != '+' && ch != '#')
            continue;
        bool alone = (i == 0 || filter[i - 1] == '/') && (i + 1 == len || filter[i + 1] == '/');
        if (!alone || (ch == '#' && i + 1 != len)) {
            if (err && errlen)
                snprintf(err, errlen, "topic filter \"" Q "\": '%c' at column %zu must be a whole level%s",
                         filter, ch, i + 1, ch == '#' ? ", and the last" : "");
            return TB_ECONFIG;
        }
    }
    return 0;
}

bool router_filter_match(const char *f, const char *topic, size_t len)
{
    if ((f[0] == '+' || f[0] == '#') && len > 0 && topic[0] == '$')
        return false;
    size_t i = 0; /* position in topic */
    for (;;) {
        if (f[0] == '#')
            return true; /* the rest, including none */
        const char *fend = strchr(f, '/');
        size_t flen = fend ? (size_t)(fend - f) : strlen(f);
        const char *tend = memchr(topic + i, '/', len - i);
        size_t tlen = tend ? (size_t)(tend - (topic + i)) : len - i;
        if (!(flen == 1 && f[0] == '+') && (flen != tlen || memcmp(f, topic + i, flen) != 0))
            return false;
        if (!fend)
            return !tend; /* both end here */
        if (!tend) {
            /* topic ended; "a/#" also matches "a" */
            return strcmp(fend + 1, "#") == 0;
        }
        f = fend + 1;
        i += tlen + 1;
    }
}
