/*
 * sch_json_compile.c: turns JSON Schema text into the node graph the
 * validator walks (the entry points sch__json_compile and sch__json_free).
 *
 * No C JSON Schema library is packaged in Debian, so this is our own, on
 * jansson. Compilation runs in three steps:
 *   1. parse the text and scan it (sch_json_ref.c): resources, anchors,
 *      base URIs;
 *   2. make nodes from a work list, not by recursion: node_for() returns a
 *      node at once (an empty shell the first time it sees a schema object)
 *      and queues it; the loop fills queued nodes keyword by keyword
 *      (sch_json_keywords.c). So a $ref cycle is just a pointer cycle, and
 *      the C stack depth does not depend on the schema;
 *   3. check the graph: a cycle made only of in-place applicators ($ref,
 *      allOf, anyOf, oneOf, not, if/then/else, dependentSchemas) would
 *      evaluate the same instance forever, so it is refused here with the
 *      place it goes through. ($dynamicRef targets are only known at
 *      validation; the evaluation depth bound covers those.)
 * After compile nothing is written to the graph again.
 */
#include "schema/sch_json.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

const sch__json_node_t sch__json_node_true = { .kind = SCH_JSON_NODE_TRUE, .loc = "true" };
const sch__json_node_t sch__json_node_false = { .kind = SCH_JSON_NODE_FALSE, .loc = "false" };

const sch__json_node_t *sch__json_node_for(sch__json_cstate_t *cs, json_t *j, const char *what)
{
    if (json_is_true(j)) return &sch__json_node_true;
    if (json_is_false(j)) return &sch__json_node_false;
    if (!json_is_object(j)) {
        sch__json_cfail(cs, TB_ESCHEMA, "%s must be a schema (object or boolean)", what);
        return NULL;
    }
    sch__json_loc_t *l = sch__json_loc_get(cs, j);
    if (!l) {
        /* every subschema keyword is scanned with its parent; reaching here
         * means a keyword the scan does not know holds a schema */
        sch__json_cfail(cs, TB_ESCHEMA, "%s: schema not reached by the scan", what);
        return NULL;
    }
    if (l->node) return l->node;
    sch__json_node_t *n = sch__json_arena_alloc(&cs->s->arena, sizeof *n);
    n->kind = SCH_JSON_NODE_OBJECT;
    n->res = l->res;
    n->loc = l->loc;
    n->cid = (uint32_t)cs->nnodes;
    l->node = n;
    if (cs->nnodes == cs->capnodes) {
        cs->capnodes = cs->capnodes ? cs->capnodes * 2 : 32;
        cs->nodes = tb_realloc(cs->nodes, cs->capnodes * sizeof *cs->nodes);
    }
    cs->nodes[cs->nnodes++] = n;
    if (cs->npending == cs->cappending) {
        cs->cappending = cs->cappending ? cs->cappending * 2 : 32;
        cs->pending = tb_realloc(cs->pending, cs->cappending * sizeof *cs->pending);
    }
    cs->pending[cs->npending++] = j;
    return n;
}

static int drain(sch__json_cstate_t *cs)
{
    while (cs->npending && !cs->rc) {
        json_t *j = cs->pending[--cs->npending];
        sch__json_node_t *n = sch__json_loc_get(cs, j)->node;
        sch__json_fill(cs, n, j);
    }
    return cs->rc;
}

/* ---- in-place cycle check ------------------------------------------------- */

/* The in-place children of a node: those applied to the same instance. */
static size_t inplace_edges(const sch__json_node_t *n, const sch__json_node_t **out, size_t cap)
{
    size_t k = 0;
#define EDGE(x) do { if ((x) && (x)->kind == SCH_JSON_NODE_OBJECT && k < cap) out[k++] = (x); } while (0)
    EDGE(n->ref);
    EDGE(n->not_);
    EDGE(n->if_);
    EDGE(n->then_);
    EDGE(n->else_);
    for (size_t i = 0; i < n->all_of.n; i++) EDGE(n->all_of.v[i]);
    for (size_t i = 0; i < n->any_of.n; i++) EDGE(n->any_of.v[i]);
    for (size_t i = 0; i < n->one_of.n; i++) EDGE(n->one_of.v[i]);
    for (size_t i = 0; i < n->ndeps; i++) EDGE(n->deps[i].node);
#undef EDGE
    return k;
}

static size_t inplace_count(const sch__json_node_t *n)
{
    return 5 + n->all_of.n + n->any_of.n + n->one_of.n + n->ndeps;
}

typedef struct {
    const sch__json_node_t *n;
    const sch__json_node_t **edges;
    size_t nedges, next;
} dfs_frame_t;

static int check_cycles(sch__json_cstate_t *cs)
{
    uint8_t *color = tb_calloc(cs->nnodes ? cs->nnodes : 1, 1); /* 0 new, 1 on path, 2 done */
    dfs_frame_t *stack = tb_malloc((cs->nnodes ? cs->nnodes : 1) * sizeof *stack);
    for (size_t root = 0; root < cs->nnodes && !cs->rc; root++) {
        if (color[root]) continue;
        size_t top = 0;
        const sch__json_node_t *start = cs->nodes[root];
        stack[top].n = start;
        stack[top].edges = tb_malloc(inplace_count(start) * sizeof *stack[top].edges);
        stack[top].nedges = inplace_edges(start, stack[top].edges, inplace_count(start));
        stack[top].next = 0;
        color[start->cid] = 1;
        top++;
        while (top && !cs->rc) {
            dfs_frame_t *f = &stack[top - 1];
            if (f->next == f->nedges) {
                color[f->n->cid] = 2;
                free(f->edges);
                top--;
                continue;
            }
            const sch__json_node_t *c = f->edges[f->next++];
            if (color[c->cid] == 1) {
                sch__json_cfail(cs, TB_ESCHEMA,
                                "$ref cycle that never consumes the instance (would loop forever) through %s",
                                sch__json_loc_short(c->loc));
                break;
            }
            if (color[c->cid]) continue;
            color[c->cid] = 1;
            stack[top].n = c;
            stack[top].edges = tb_malloc(inplace_count(c) * sizeof *stack[top].edges);
            stack[top].nedges = inplace_edges(c, stack[top].edges, inplace_count(c));
            stack[top].next = 0;
            top++;
        }
        while (top) free(stack[--top].edges);
    }
    free(stack);
    free(color);
    return cs->rc;
}

/* ---- entry points --------------------------------------------------------- */

void sch__json_free(sch__json_t *s)
{
    if (!s) return;
    for (size_t k = 0; k < s->nres; k++) {
        free(s->res[k]->uri);
        free(s->res[k]->anchors);
        free(s->res[k]);
    }
    free(s->res);
    for (size_t k = 0; k < s->nregexes; k++) sch__json_regex_free(s->regexes[k]);
    free(s->regexes);
    for (size_t k = 0; k < s->ndocs; k++) json_decref(s->docs[k]);
    free(s->docs);
    sch__json_arena_free(&s->arena);
    free(s);
}

int sch__json_compile_draft(const char *text, size_t len, const sch_opts_t *opts, sch_json_draft_t default_draft,
                            sch__json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen) err[0] = '\0';
    sch__json_t *s = tb_calloc(1, sizeof *s);
    sch__json_cstate_t cs = { .s = s, .opts = opts, .default_draft = default_draft, .err = err, .errlen = errlen };
    json_error_t jerr;
    json_t *doc = sch__json_parse(text, len, &jerr);
    if (!doc) {
        sch__json_cfail(&cs, TB_ESCHEMA, "schema is not JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                        jerr.column);
    } else {
        s->docs = tb_malloc(sizeof *s->docs);
        s->docs[s->ndocs++] = doc;
        if (!json_is_object(doc) && !json_is_boolean(doc))
            sch__json_cfail(&cs, TB_ESCHEMA, "schema must be an object or a boolean");
    }
    if (!cs.rc && sch__json_scan_doc(&cs, doc, SCH_JSON_DEFAULT_BASE) == 0) {
        s->root = sch__json_node_for(&cs, doc, "the schema");
        drain(&cs);
        /* dynamic anchors of every resource may be jumped to at validation */
        for (size_t r = 0; r < s->nres && !cs.rc; r++) {
            sch__json_res_t *res = s->res[r];
            for (size_t a = 0; a < res->nanchors && !cs.rc; a++) {
                if (!res->anchors[a].dynamic) continue;
                res->anchors[a].node = sch__json_node_for(&cs, res->anchors[a].target, "$dynamicAnchor");
                drain(&cs);
            }
        }
        if (!cs.rc) check_cycles(&cs);
    }
    for (size_t k = 0; k < cs.nalias; k++) free(cs.alias[k].uri);
    free(cs.alias);
    free(cs.tab);
    free(cs.pending);
    free(cs.nodes);
    if (cs.rc) {
        sch__json_free(s);
        return cs.rc;
    }
    *out = s;
    return 0;
}

int sch__json_compile(const char *text, size_t len, const sch_opts_t *opts, sch__json_t **out, char *err,
                      size_t errlen)
{
    return sch__json_compile_draft(text, len, opts, SCH_JSON_DRAFT2020, out, err, errlen);
}
