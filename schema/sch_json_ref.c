/*
 * sch_json_ref.c: documents, schema resources, anchors and $ref resolution.
 *
 * Before any node is compiled, each document is scanned once: every schema
 * object reachable through the draft's subschema keywords gets a record of
 * its base URI and resource (sch__json_loc_t), every "$id" starts a resource,
 * and "$anchor"/"$dynamicAnchor" (2020-12) or a fragment "$id" (draft 7) name
 * a place in one. Only subschema keywords are followed, so an "$id" inside
 * an "enum" value or an unknown keyword is not an identifier, as the spec
 * says. A JSON Pointer may still lead anywhere; a target the scan did not
 * reach is scanned on arrival, with its resource's base.
 *
 * Documents come from the schema text itself, from the embedded standard
 * metaschemas, and from opts->resolve (schemas the registry supplied); there
 * is no other source and never a network fetch. The number of documents is
 * capped (SCH_JSON_MAX_DOCS), and so is the nesting the scan will follow.
 *
 * Dialect: "$schema" at a resource root picks draft 7 or 2020-12; any other
 * value must name a metaschema we can load whose own "$schema" is one of
 * those two, and whose "$vocabulary" decides which keyword groups apply
 * (an unknown vocabulary marked required makes the schema unsupported).
 * Without "$schema" a document takes the compile's default (2020-12).
 */
#include "schema/sch_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int sch__json_cfail(sch__json_cstate_t *cs, int rc, const char *fmt, ...)
{
    if (cs->rc) return cs->rc;
    cs->rc = rc;
    if (cs->err && cs->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cs->err, cs->errlen, fmt, ap);
        va_end(ap);
        sch__json_utf8_trim(cs->err);
    }
    return rc;
}

json_t *sch__json_parse(const char *text, size_t len, json_error_t *jerr)
{
    const size_t flags = JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES;
    json_t *j = json_loadb(text, len, flags, jerr);
    /* an integer beyond int64: read every number as a double instead (an
     * integral double stays an integer for "type": "integer") */
    if (!j && json_error_code(jerr) == json_error_numeric_overflow)
        j = json_loadb(text, len, flags | JSON_DECODE_INT_AS_REAL, jerr);
    return j;
}

const char *sch__json_loc_short(const char *loc)
{
    size_t n = strlen(SCH_JSON_DEFAULT_BASE);
    return strncmp(loc, SCH_JSON_DEFAULT_BASE, n) == 0 ? loc + n : loc;
}

/* ---- the json_t -> record table ----------------------------------------- */

static size_t ptr_hash(const json_t *j)
{
    uint64_t h = (uint64_t)(uintptr_t)j;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h;
}

sch__json_loc_t *sch__json_loc_get(sch__json_cstate_t *cs, const json_t *j)
{
    if (!cs->cap) return NULL;
    for (size_t i = ptr_hash(j) & (cs->cap - 1);; i = (i + 1) & (cs->cap - 1)) {
        if (cs->tab[i].key == j) return &cs->tab[i];
        if (!cs->tab[i].key) return NULL;
    }
}

static sch__json_loc_t *loc_put(sch__json_cstate_t *cs, const json_t *j)
{
    if ((cs->count + 1) * 2 > cs->cap) {
        size_t ncap = cs->cap ? cs->cap * 2 : 64;
        sch__json_loc_t *old = cs->tab;
        size_t ocap = cs->cap;
        cs->tab = tb_calloc(ncap, sizeof *cs->tab);
        cs->cap = ncap;
        for (size_t k = 0; k < ocap; k++) {
            if (!old[k].key) continue;
            size_t i = ptr_hash(old[k].key) & (ncap - 1);
            while (cs->tab[i].key) i = (i + 1) & (ncap - 1);
            cs->tab[i] = old[k];
        }
        free(old);
    }
    size_t i = ptr_hash(j) & (cs->cap - 1);
    while (cs->tab[i].key) i = (i + 1) & (cs->cap - 1);
    cs->tab[i].key = j;
    cs->count++;
    return &cs->tab[i];
}

/* ---- resources ------------------------------------------------------------ */

static sch__json_res_t *res_find(sch__json_cstate_t *cs, const char *uri, size_t len)
{
    for (size_t k = 0; k < cs->s->nres; k++) {
        sch__json_res_t *r = cs->s->res[k];
        if (strlen(r->uri) == len && memcmp(r->uri, uri, len) == 0) return r;
    }
    for (size_t k = 0; k < cs->nalias; k++)
        if (strlen(cs->alias[k].uri) == len && memcmp(cs->alias[k].uri, uri, len) == 0)
            return cs->alias[k].res;
    return NULL;
}

static sch__json_res_t *res_new(sch__json_cstate_t *cs, const char *uri, size_t len, json_t *root,
                                sch_json_draft_t draft, unsigned vocab)
{
    sch__json_t *s = cs->s;
    sch__json_res_t *r = tb_calloc(1, sizeof *r);
    r->uri = tb_strndup(uri, len);
    r->root = root;
    r->draft = draft;
    r->vocab = vocab;
    if (s->nres == s->capres) {
        s->capres = s->capres ? s->capres * 2 : 8;
        s->res = tb_realloc(s->res, s->capres * sizeof *s->res);
    }
    s->res[s->nres++] = r;
    return r;
}

static void res_anchor(sch__json_res_t *r, const char *name, size_t len, json_t *target, bool dynamic)
{
    for (size_t k = 0; k < r->nanchors; k++)
        if (r->anchors[k].len == len && memcmp(r->anchors[k].name, name, len) == 0) return;
    if (r->nanchors == r->capanchors) {
        r->capanchors = r->capanchors ? r->capanchors * 2 : 4;
        r->anchors = tb_realloc(r->anchors, r->capanchors * sizeof *r->anchors);
    }
    r->anchors[r->nanchors++] = (sch__json_anchor_t){ .name = name, .len = len, .target = target,
                                                      .dynamic = dynamic };
}

static const sch__json_anchor_t *res_find_anchor(const sch__json_res_t *r, const char *name, size_t len)
{
    for (size_t k = 0; k < r->nanchors; k++)
        if (r->anchors[k].len == len && memcmp(r->anchors[k].name, name, len) == 0) return &r->anchors[k];
    return NULL;
}

const sch__json_node_t *sch__json_res_dynamic(const sch__json_res_t *r, const char *name, size_t len)
{
    const sch__json_anchor_t *a = res_find_anchor(r, name, len);
    return a && a->dynamic ? a->node : NULL;
}

/* ---- documents and dialects ---------------------------------------------- */

static sch__json_res_t *load_doc(sch__json_cstate_t *cs, const char *uri, size_t urilen);

static const struct {
    const char *uri;
    unsigned bit;
} vocab_uris[] = {
    { "https://json-schema.org/draft/2020-12/vocab/core", 0 },
    { "https://json-schema.org/draft/2020-12/vocab/applicator", SCH_JSON_VOC_APPLICATOR },
    { "https://json-schema.org/draft/2020-12/vocab/unevaluated", SCH_JSON_VOC_UNEVALUATED },
    { "https://json-schema.org/draft/2020-12/vocab/validation", SCH_JSON_VOC_VALIDATION },
    { "https://json-schema.org/draft/2020-12/vocab/meta-data", 0 },
    { "https://json-schema.org/draft/2020-12/vocab/format-annotation", 0 },
    { "https://json-schema.org/draft/2020-12/vocab/format-assertion", SCH_JSON_VOC_FORMAT_ASSERT },
    { "https://json-schema.org/draft/2020-12/vocab/content", 0 },
};

static bool standard_dialect(const char *u, size_t n, sch_json_draft_t *draft)
{
    static const char d7[] = "http://json-schema.org/draft-07/schema";
    static const char d2020[] = "https://json-schema.org/draft/2020-12/schema";
    if (n && u[n - 1] == '#') n--;
    if (n == sizeof d7 - 1 && memcmp(u, d7, n) == 0) {
        *draft = SCH_JSON_DRAFT7;
        return true;
    }
    if (n == sizeof d2020 - 1 && memcmp(u, d2020, n) == 0) {
        *draft = SCH_JSON_DRAFT2020;
        return true;
    }
    return false;
}

/* The dialect named by a "$schema" value. */
static int dialect(sch__json_cstate_t *cs, const json_t *sv, sch_json_draft_t *draft, unsigned *vocab)
{
    *vocab = SCH_JSON_VOC_ALL_DEFAULT;
    if (!json_is_string(sv)) return sch__json_cfail(cs, TB_ESCHEMA, "$schema must be a string");
    const char *u = json_string_value(sv);
    size_t n = json_string_length(sv);
    if (standard_dialect(u, n, draft)) return 0;
    if (cs->meta_depth >= 4)
        return sch__json_cfail(cs, TB_EUNSUPPORTED, "$schema %s: metaschema chain too deep", u);
    size_t nf = sch__json_uri_nofrag_len(u);
    sch__json_res_t *m = res_find(cs, u, nf);
    cs->meta_depth++;
    if (!m && !cs->rc) m = load_doc(cs, u, nf);
    cs->meta_depth--;
    if (cs->rc) return cs->rc;
    if (!m || !json_is_object(m->root))
        return sch__json_cfail(cs, TB_EUNSUPPORTED, "unsupported $schema %s (draft-07 and 2020-12 only)", u);
    *draft = m->draft;
    json_t *voc = json_object_get(m->root, "$vocabulary");
    if (!json_is_object(voc)) return 0;
    *vocab = 0;
    const char *key;
    json_t *req;
    json_object_foreach(voc, key, req) {
        size_t k;
        for (k = 0; k < TB_ARRAY_LEN(vocab_uris); k++)
            if (strcmp(key, vocab_uris[k].uri) == 0) break;
        if (k < TB_ARRAY_LEN(vocab_uris)) *vocab |= vocab_uris[k].bit;
        else if (json_is_true(req))
            return sch__json_cfail(cs, TB_EUNSUPPORTED, "$schema %s requires unknown vocabulary %s", u, key);
    }
    return 0;
}

static int scan(sch__json_cstate_t *cs, json_t *j, const char *base, sch__json_res_t *res,
                const char *loc, unsigned depth, bool doc_root);

int sch__json_scan_doc(sch__json_cstate_t *cs, json_t *root, const char *retrieval_uri)
{
    sch_json_draft_t draft = cs->default_draft;
    unsigned vocab = SCH_JSON_VOC_ALL_DEFAULT;
    json_t *sv = json_object_get(root, "$schema");
    if (sv && dialect(cs, sv, &draft, &vocab)) return cs->rc;
    if (draft == SCH_JSON_DRAFT7) vocab = SCH_JSON_VOC_ALL_DEFAULT;

    char *uri = tb_strdup(retrieval_uri);
    json_t *id = json_object_get(root, "$id");
    bool ref_sibling = draft == SCH_JSON_DRAFT7 && json_object_get(root, "$ref");
    if (json_is_string(id) && json_string_value(id)[0] != '#' && !ref_sibling) {
        char *abs = sch__json_uri_resolve(retrieval_uri, json_string_value(id));
        abs[sch__json_uri_nofrag_len(abs)] = '\0';
        free(uri);
        uri = abs;
    }
    sch__json_res_t *res = res_new(cs, uri, strlen(uri), root, draft, vocab);
    if (strcmp(uri, retrieval_uri) != 0) {
        if (cs->nalias == cs->capalias) {
            cs->capalias = cs->capalias ? cs->capalias * 2 : 4;
            cs->alias = tb_realloc(cs->alias, cs->capalias * sizeof *cs->alias);
        }
        cs->alias[cs->nalias++] = (sch__json_alias_t){ tb_strdup(retrieval_uri), res };
    }
    char *loc = tb_asprintf("%s#", uri);
    int rc = scan(cs, root, res->uri, res, loc, 0, true);
    free(loc);
    free(uri);
    return rc;
}

static sch__json_res_t *load_doc(sch__json_cstate_t *cs, const char *uri, size_t urilen)
{
    char *u = tb_strndup(uri, urilen);
    size_t len = 0;
    const char *text = sch__json_meta_text(u, urilen, &len);
    if (!text && cs->opts && cs->opts->resolve) text = cs->opts->resolve(cs->opts->resolve_arg, u, &len);
    if (!text) {
        free(u);
        return NULL;
    }
    if (cs->s->ndocs >= SCH_JSON_MAX_DOCS) {
        sch__json_cfail(cs, TB_ESCHEMA, "more than %d schema documents referenced", SCH_JSON_MAX_DOCS);
        free(u);
        return NULL;
    }
    json_error_t jerr;
    json_t *doc = sch__json_parse(text, len, &jerr);
    if (!doc) {
        sch__json_cfail(cs, TB_ESCHEMA, "referenced schema %s is not JSON: %s (line %d)", u, jerr.text, jerr.line);
        free(u);
        return NULL;
    }
    cs->s->docs = tb_realloc(cs->s->docs, (cs->s->ndocs + 1) * sizeof *cs->s->docs);
    cs->s->docs[cs->s->ndocs++] = doc;
    sch__json_res_t *r = NULL;
    if (sch__json_scan_doc(cs, doc, u) == 0) r = res_find(cs, u, urilen);
    free(u);
    return r;
}

/* ---- the scan ------------------------------------------------------------- */

/* Appends "/<escaped key>" to a location. */
static char *loc_child(sch__json_cstate_t *cs, const char *loc, const char *key, size_t keylen)
{
    size_t n = strlen(loc), extra = 0;
    for (size_t k = 0; k < keylen; k++) extra += (key[k] == '~' || key[k] == '/');
    char *out = sch__json_arena_alloc(&cs->s->arena, n + 1 + keylen + extra + 1);
    memcpy(out, loc, n);
    char *o = out + n;
    *o++ = '/';
    for (size_t k = 0; k < keylen; k++) {
        if (key[k] == '~') { *o++ = '~'; *o++ = '0'; }
        else if (key[k] == '/') { *o++ = '~'; *o++ = '1'; }
        else *o++ = key[k];
    }
    *o = '\0';
    return out;
}

static char *loc_index(sch__json_cstate_t *cs, const char *loc, size_t i)
{
    char num[24];
    int k = snprintf(num, sizeof num, "%zu", i);
    return loc_child(cs, loc, num, (size_t)k);
}

static const char *const kw_single_2020[] = { "additionalProperties", "propertyNames", "items", "contains", "not",
                                              "if", "then", "else", "unevaluatedItems", "unevaluatedProperties",
                                              "contentSchema" };
static const char *const kw_map_2020[] = { "$defs", "properties", "patternProperties", "dependentSchemas",
                                           "dependencies" };
static const char *const kw_list_2020[] = { "allOf", "anyOf", "oneOf", "prefixItems" };
static const char *const kw_single_7[] = { "additionalProperties", "propertyNames", "items", "additionalItems",
                                           "contains", "not", "if", "then", "else" };
static const char *const kw_map_7[] = { "definitions", "properties", "patternProperties", "dependencies", NULL };
static const char *const kw_list_7[] = { "allOf", "anyOf", "oneOf", "items" };

static int scan_children(sch__json_cstate_t *cs, json_t *j, const char *base, sch__json_res_t *res,
                         const char *loc, unsigned depth)
{
    bool d7 = res->draft == SCH_JSON_DRAFT7;
    const char *const *single = d7 ? kw_single_7 : kw_single_2020;
    size_t nsingle = d7 ? TB_ARRAY_LEN(kw_single_7) : TB_ARRAY_LEN(kw_single_2020);
    const char *const *map = d7 ? kw_map_7 : kw_map_2020;
    const char *const *list = d7 ? kw_list_7 : kw_list_2020;
    for (size_t k = 0; k < nsingle && !cs->rc; k++) {
        json_t *v = json_object_get(j, single[k]);
        if (json_is_object(v)) scan(cs, v, base, res, loc_child(cs, loc, single[k], strlen(single[k])), depth + 1, false);
    }
    for (size_t k = 0; k < 5 && map[k] && !cs->rc; k++) {
        json_t *m = json_object_get(j, map[k]);
        if (!json_is_object(m)) continue;
        const char *mloc = loc_child(cs, loc, map[k], strlen(map[k]));
        for (void *it = json_object_iter(m); it && !cs->rc; it = json_object_iter_next(m, it)) {
            json_t *v = json_object_iter_value(it);
            if (json_is_object(v))
                scan(cs, v, base, res, loc_child(cs, mloc, json_object_iter_key(it), json_object_iter_key_len(it)),
                     depth + 1, false);
        }
    }
    for (size_t k = 0; k < 4 && !cs->rc; k++) {
        json_t *a = json_object_get(j, list[k]);
        if (!json_is_array(a)) continue;
        const char *aloc = loc_child(cs, loc, list[k], strlen(list[k]));
        for (size_t i = 0; i < json_array_size(a) && !cs->rc; i++) {
            json_t *v = json_array_get(a, i);
            if (json_is_object(v)) scan(cs, v, base, res, loc_index(cs, aloc, i), depth + 1, false);
        }
    }
    return cs->rc;
}

static int scan(sch__json_cstate_t *cs, json_t *j, const char *base, sch__json_res_t *res,
                const char *loc, unsigned depth, bool doc_root)
{
    if (!json_is_object(j) || cs->rc) return cs->rc;
    if (depth > SCH_JSON_MAX_SCHEMA_DEPTH)
        return sch__json_cfail(cs, TB_ESCHEMA, "schema nested deeper than %d levels at %s",
                               SCH_JSON_MAX_SCHEMA_DEPTH, sch__json_loc_short(loc));
    if (sch__json_loc_get(cs, j)) return 0;

    json_t *id = json_object_get(j, "$id");
    bool ref_sibling = res->draft == SCH_JSON_DRAFT7 && json_object_get(j, "$ref");
    if (json_is_string(id) && !ref_sibling) {
        const char *ids = json_string_value(id);
        char *abs = sch__json_uri_resolve(base, ids);
        size_t nf = sch__json_uri_nofrag_len(abs);
        if (ids[0] != '#' && !doc_root) {
            sch_json_draft_t draft = res->draft;
            unsigned vocab = res->vocab;
            json_t *sv = json_object_get(j, "$schema");
            if (sv && dialect(cs, sv, &draft, &vocab)) {
                free(abs);
                return cs->rc;
            }
            if (draft == SCH_JSON_DRAFT7) vocab = SCH_JSON_VOC_ALL_DEFAULT;
            res = res_new(cs, abs, nf, j, draft, vocab);
            base = res->uri;
            loc = sch__json_arena_strndup(&cs->s->arena, abs, nf + 1);
            ((char *)loc)[nf] = '#';
        }
        /* draft 7: "$id": "#name" (or "...#name") is a plain-name anchor */
        if (res->draft == SCH_JSON_DRAFT7 && abs[nf] == '#' && abs[nf + 1] && abs[nf + 1] != '/') {
            size_t an = strlen(abs + nf + 1);
            res_anchor(res, sch__json_arena_strndup(&cs->s->arena, abs + nf + 1, an), an, j, false);
        }
        free(abs);
    }
    if (res->draft == SCH_JSON_DRAFT2020) {
        json_t *a = json_object_get(j, "$anchor");
        if (json_is_string(a))
            res_anchor(res, json_string_value(a), json_string_length(a), j, false);
        a = json_object_get(j, "$dynamicAnchor");
        if (json_is_string(a))
            res_anchor(res, json_string_value(a), json_string_length(a), j, true);
    }
    sch__json_loc_t *l = loc_put(cs, j);
    l->base = base;
    l->res = res;
    l->loc = doc_root ? sch__json_arena_strndup(&cs->s->arena, loc, strlen(loc)) : loc;
    return scan_children(cs, j, base, res, l->loc, depth);
}

/* ---- resolution ----------------------------------------------------------- */

int sch__json_resolve(sch__json_cstate_t *cs, const char *base, const char *ref, sch__json_target_t *t)
{
    memset(t, 0, sizeof *t);
    char *abs = sch__json_uri_resolve(base, ref);
    size_t nf = sch__json_uri_nofrag_len(abs);
    sch__json_res_t *res = res_find(cs, abs, nf);
    if (!res && !cs->rc) res = load_doc(cs, abs, nf);
    if (cs->rc) {
        free(abs);
        return cs->rc;
    }
    if (!res) {
        sch__json_cfail(cs, TB_ESCHEMA, "$ref %s: no schema known at %.*s%s", ref, (int)nf, abs,
                        cs->opts && cs->opts->resolve ? "" : " (no resolver given)");
        free(abs);
        return cs->rc;
    }
    const char *frag = abs[nf] == '#' ? abs + nf + 1 : "";
    size_t flen;
    char *dec = sch__json_pct_decode(frag, strlen(frag), &flen);
    if (!dec) {
        sch__json_cfail(cs, TB_ESCHEMA, "$ref %s: bad percent-encoding", ref);
        free(abs);
        return cs->rc;
    }
    t->res = res;
    if (flen == 0) {
        t->json = res->root;
    } else if (dec[0] == '/') {
        t->json = sch__json_pointer_get(res->root, dec, flen);
        if (t->json && json_is_object(t->json) && !sch__json_loc_get(cs, t->json)) {
            /* a place the scan did not reach (e.g. under an unknown keyword) */
            char *loc = sch__json_arena_strndup(&cs->s->arena, abs, strlen(abs));
            scan(cs, t->json, res->uri, res, loc, 0, false);
        }
    } else {
        const sch__json_anchor_t *a = res_find_anchor(res, dec, flen);
        if (a) {
            t->json = a->target;
            t->anchor = a->name;
            t->anchor_len = a->len;
            t->dynamic = a->dynamic;
        }
    }
    if (!cs->rc && (!t->json || !(json_is_object(t->json) || json_is_boolean(t->json))))
        sch__json_cfail(cs, TB_ESCHEMA, "$ref %s: %s", ref, t->json ? "target is not a schema" : "target not found");
    free(dec);
    free(abs);
    return cs->rc;
}
