/*
 * sch_json_validate.c: walks a compiled schema over an instance.
 *
 * sch__json_eval() applies one node: $ref/$dynamicRef, the assertions
 * (sch_json_check.c), the in-place applicators (allOf, anyOf, oneOf, not,
 * if/then/else), then unevaluatedProperties/unevaluatedItems last, as the
 * spec orders them. All state lives in a per-call context on the caller's
 * stack, so one compiled schema serves any number of threads.
 *
 * Annotations: unevaluated* need to know which properties or items every
 * successful in-place subschema evaluated, across $ref and the logic
 * keywords. A node that has unevaluated* gives its keywords a fresh
 * evaluated-set (sch__json_ev_t, one flag per member); in-place children
 * write into it, or into a scratch set that is merged only when the child
 * passed (anyOf, oneOf, if), because failed subschemas produce no
 * annotations. Without unevaluated* above, no set exists and nothing is
 * tracked, so the common schema pays nothing for the feature.
 *
 * Errors: the first failure outside anyOf/oneOf/not/if/contains is written
 * as "<JSON Pointer of the instance>: <what failed>" (root is "(root)"),
 * e.g. "/temperature: 130 > maximum 120". Inside those keywords failures
 * are expected, so the context is quiet and the keyword reports for itself.
 * A bound (evaluation depth or steps, regex work) aborts the whole validation as
 * invalid, even under "not", so a bound can never turn into a pass.
 */
#include "schema/sch_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ---- errors ------------------------------------------------------------- */

/* Writes the instance path into out (up to cap - 1 bytes, NUL-terminated
 * when cap > 0); returns its full length, like snprintf. */
static size_t render_path(const sch__json_vctx_t *c, char *out, size_t cap)
{
    size_t o = 0;
#define PUT(ch) do { if (o + 1 < cap) out[o] = (ch); o++; } while (0)
    if (c->npath == 0) {
        for (const char *r = "(root)"; *r; r++) PUT(*r);
    }
    for (size_t k = 0; k < c->npath; k++) {
        const sch__json_seg_t *s = &c->path[k];
        PUT('/');
        if (!s->key) {
            char num[24];
            snprintf(num, sizeof num, "%zu", s->len);
            for (const char *r = num; *r; r++) PUT(*r);
            continue;
        }
        for (size_t i = 0; i < s->len; i++) {
            unsigned char ch = (unsigned char)s->key[i];
            if (ch == '~') { PUT('~'); PUT('0'); }
            else if (ch == '/') { PUT('~'); PUT('1'); }
            else PUT(ch < 0x20 || ch == 0x7f ? '?' : (char)ch);
        }
    }
#undef PUT
    if (cap) out[o < cap ? o : cap - 1] = '\0';
    return o;
}

/* Moves k back to the start of the UTF-8 character that contains s[k]. */
static size_t char_start(const char *s, size_t k)
{
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) k--;
    return k;
}

void sch__json_utf8_trim(char *s)
{
    size_t n = strlen(s);
    if (n == 0) return;
    size_t j = char_start(s, n - 1);
    unsigned lead = (unsigned char)s[j];
    size_t want = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
    if (n - j < want) s[j] = '\0';
}

int sch__json_utf8_cut(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n <= max) return (int)n;
    return (int)char_start(s, max);
}

/* "<path>: <message>". A path longer than half the buffer keeps its start
 * and end around "...", so the reason is never crowded out; the result is
 * cut on a UTF-8 character boundary. */
static void vwrite(sch__json_vctx_t *c, const char *fmt, va_list ap)
{
    if (!c->err || !c->errlen) return;
    size_t full = render_path(c, NULL, 0);
    char *path = tb_malloc(full + 1);
    render_path(c, path, full + 1);
    size_t budget = c->errlen / 2 > 16 ? c->errlen / 2 : 16;
    if (full > budget) {
        /* cut at segment boundaries when there is one: "/a/b/.../y/z" */
        size_t head = budget / 2, tail = full - (budget - budget / 2 - 4);
        size_t h = head, t = tail;
        while (h > 0 && path[h] != '/') h--;
        while (t < full && path[t] != '/') t++;
        head = h > 0 ? h : char_start(path, head);
        tail = t < full ? t : char_start(path, tail);
        memmove(path + head + 4, path + tail, full - tail + 1);
        memcpy(path + head, "/...", 4);
    }
    int k = snprintf(c->err, c->errlen, "%s: ", path);
    free(path);
    if (k >= 0 && (size_t)k < c->errlen) vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
    sch__json_utf8_trim(c->err);
}

void sch__json_verr(sch__json_vctx_t *c, const char *fmt, ...)
{
    if (c->quiet || c->err_set) return;
    c->err_set = true;
    va_list ap;
    va_start(ap, fmt);
    vwrite(c, fmt, ap);
    va_end(ap);
}

void sch__json_verr_key(sch__json_vctx_t *c, const char *key, size_t len, const char *fmt, ...)
{
    if (c->quiet || c->err_set) return;
    c->err_set = true;
    sch__json_push_key(c, key, len);
    va_list ap;
    va_start(ap, fmt);
    vwrite(c, fmt, ap);
    va_end(ap);
    c->npath--;
}

void sch__json_vabort(sch__json_vctx_t *c, const char *fmt, ...)
{
    if (c->abort) return;
    c->abort = true;
    c->err_set = true;
    va_list ap;
    va_start(ap, fmt);
    vwrite(c, fmt, ap);
    va_end(ap);
}

/* ---- evaluated sets --------------------------------------------------------- */

static void ev_init(sch__json_ev_t *ev, size_t n)
{
    ev->n = n;
    ev->b = n <= sizeof ev->small ? ev->small : tb_malloc(n);
    memset(ev->b, 0, n);
}

static void ev_done(sch__json_ev_t *ev)
{
    if (ev->b != ev->small) free(ev->b);
}

static void ev_merge(sch__json_ev_t *dst, const sch__json_ev_t *src)
{
    for (size_t i = 0; i < dst->n; i++) dst->b[i] |= src->b[i];
}

/* Runs a child in place with a scratch evaluated-set that reaches `ev` only
 * if the child passes. */
static bool eval_scratch(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev,
                         const char *kw)
{
    if (!ev) return sch__json_eval(c, n, x, NULL, kw);
    sch__json_ev_t t;
    ev_init(&t, ev->n);
    bool ok = sch__json_eval(c, n, x, &t, kw);
    if (ok) ev_merge(ev, &t);
    ev_done(&t);
    return ok;
}

/* ---- in-place applicators ---------------------------------------------------- */

static bool eval_any_of(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    bool any = false;
    c->quiet++;
    for (size_t i = 0; i < n->any_of.n && !c->abort; i++) {
        if (eval_scratch(c, n->any_of.v[i], x, ev, "anyOf")) {
            any = true;
            if (!ev) break; /* without annotations to collect, one is enough */
        }
    }
    c->quiet--;
    if (!any) sch__json_verr(c, "matches none of the %zu schemas in anyOf", n->any_of.n);
    return any;
}

static bool eval_one_of(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    size_t first = 0, matches = 0;
    sch__json_ev_t keep;
    if (ev) ev_init(&keep, ev->n);
    c->quiet++;
    for (size_t i = 0; i < n->one_of.n && matches < 2 && !c->abort; i++) {
        sch__json_ev_t t;
        if (ev) ev_init(&t, ev->n);
        if (sch__json_eval(c, n->one_of.v[i], x, ev ? &t : NULL, "oneOf")) {
            if (matches++ == 0) {
                first = i;
                if (ev) ev_merge(&keep, &t);
            } else {
                c->quiet--;
                sch__json_verr(c, "matches both schema %zu and schema %zu of oneOf", first, i);
                c->quiet++;
            }
        }
        if (ev) ev_done(&t);
    }
    c->quiet--;
    if (matches == 0) sch__json_verr(c, "matches none of the %zu schemas in oneOf", n->one_of.n);
    if (matches == 1 && ev) ev_merge(ev, &keep);
    if (ev) ev_done(&keep);
    return matches == 1;
}

static bool eval_not(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x)
{
    c->quiet++;
    bool matched = sch__json_eval(c, n->not_, x, NULL, "not");
    c->quiet--;
    if (c->abort) return false;
    if (matched) sch__json_verr(c, "matches the schema in not");
    return !matched;
}

static bool eval_if(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    c->quiet++;
    bool cond = eval_scratch(c, n->if_, x, ev, "if");
    c->quiet--;
    if (c->abort) return false;
    const sch__json_node_t *branch = cond ? n->then_ : n->else_;
    return !branch || sch__json_eval(c, branch, x, ev, cond ? "then" : "else");
}

static bool eval_dynref(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    const sch__json_node_t *t = n->dynref;
    if (n->dyn_anchor) {
        /* the outermost resource in the dynamic scope that has the anchor */
        for (size_t i = 0; i < c->nscope; i++) {
            const sch__json_node_t *d = sch__json_res_dynamic(c->scope[i], n->dyn_anchor, n->dyn_anchor_len);
            if (d) {
                t = d;
                break;
            }
        }
    }
    return sch__json_eval(c, t, x, ev, "$dynamicRef");
}

/* ---- unevaluated* ---------------------------------------------------------- */

static bool eval_unevaluated(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    if (n->uneval_props && json_is_object(x)) {
        size_t i = 0;
        for (void *it = json_object_iter((json_t *)x); it; it = json_object_iter_next((json_t *)x, it), i++) {
            if (ev->b[i]) continue;
            sch__json_push_key(c, json_object_iter_key(it), json_object_iter_key_len(it));
            bool ok = sch__json_eval(c, n->uneval_props, json_object_iter_value(it), NULL, "unevaluatedProperties");
            c->npath--;
            if (!ok) return false;
            ev->b[i] = 1;
        }
    }
    if (n->uneval_items && json_is_array(x)) {
        for (size_t i = 0; i < json_array_size(x); i++) {
            if (ev->b[i]) continue;
            sch__json_push_index(c, i);
            bool ok = sch__json_eval(c, n->uneval_items, json_array_get(x, i), NULL, "unevaluatedItems");
            c->npath--;
            if (!ok) return false;
            ev->b[i] = 1;
        }
    }
    return true;
}

/* ---- one node ---------------------------------------------------------------- */

static bool eval_keywords(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev)
{
    if (n->ref && !sch__json_eval(c, n->ref, x, ev, "$ref")) return false;
    if (n->dynref && !eval_dynref(c, n, x, ev)) return false;
    if (!sch__json_eval_scalar(c, n, x)) return false;
    if (json_is_object(x) && !sch__json_eval_object(c, n, x, ev)) return false;
    if (json_is_array(x) && !sch__json_eval_array(c, n, x, ev)) return false;
    for (size_t i = 0; i < n->all_of.n; i++)
        if (!sch__json_eval(c, n->all_of.v[i], x, ev, "allOf")) return false;
    if (n->any_of.n && !eval_any_of(c, n, x, ev)) return false;
    if (n->one_of.n && !eval_one_of(c, n, x, ev)) return false;
    if (n->not_ && !eval_not(c, n, x)) return false;
    if (n->if_ && !eval_if(c, n, x, ev)) return false;
    return true;
}

bool sch__json_eval(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev,
                    const char *kw)
{
    if (c->abort) return false;
    if (n->kind == SCH_JSON_NODE_TRUE) return true;
    if (n->kind == SCH_JSON_NODE_FALSE) {
        sch__json_verr(c, "not allowed (%s is false)", kw);
        return false;
    }
    if (++c->steps > SCH_JSON_MAX_EVAL_STEPS) {
        /* a schema whose applicators multiply (nested anyOf over $refs) can
         * ask for exponential work; the loop thread must not pay it */
        sch__json_vabort(c, "evaluation exceeded %d subschema steps", SCH_JSON_MAX_EVAL_STEPS);
        return false;
    }
    if (c->depth >= SCH_JSON_MAX_EVAL_DEPTH) {
        sch__json_vabort(c, "evaluation deeper than %d levels (instance too deeply nested for a recursive schema)",
                         SCH_JSON_MAX_EVAL_DEPTH);
        return false;
    }
    c->depth++;
    bool pushed = false;
    if (c->nscope == 0 || c->scope[c->nscope - 1] != n->res) {
        c->scope[c->nscope++] = n->res;
        pushed = true;
    }
    bool own = (n->uneval_props && json_is_object(x)) || (n->uneval_items && json_is_array(x));
    sch__json_ev_t local;
    if (own) ev_init(&local, json_is_object(x) ? json_object_size(x) : json_array_size(x));
    bool ok = eval_keywords(c, n, x, own ? &local : ev);
    if (ok && own) ok = eval_unevaluated(c, n, x, &local);
    if (ok && own && ev) ev_merge(ev, &local);
    if (own) ev_done(&local);
    if (pushed) c->nscope--;
    c->depth--;
    return ok && !c->abort;
}

/* ---- entry points ------------------------------------------------------------- */

int sch__json_validate_value(const sch__json_t *s, const json_t *instance, char *err, size_t errlen)
{
    sch__json_vctx_t c;
    c.err = err;
    c.errlen = errlen;
    c.err_set = c.abort = false;
    c.quiet = c.depth = 0;
    c.steps = 0;
    c.npath = c.nscope = 0;
    if (err && errlen) err[0] = '\0';
    bool ok = sch__json_eval(&c, s->root, instance, NULL, "the schema");
    if (ok) {
        if (err && errlen) err[0] = '\0';
        return 0;
    }
    if (!c.err_set && err && errlen) snprintf(err, errlen, "invalid");
    return TB_EINVALID;
}

int sch__json_validate(const sch__json_t *s, const uint8_t *payload, size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *x = sch__json_parse((const char *)payload, len, &jerr);
    if (!x) {
        if (err && errlen)
            snprintf(err, errlen, "payload is not JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        return TB_EINVALID;
    }
    int rc = sch__json_validate_value(s, x, err, errlen);
    json_decref(x);
    return rc;
}
