/*
 * sch_json.h: the JSON Schema validator, internal to schema/.
 *
 * Debian packages no C library for JSON Schema, so we write our own on
 * jansson. sch_validator.c (the kind dispatch) wraps the four sch__json_*
 * entry points below; the rest of this header is shared between the
 * sch_json*.c files and the unit tests, and is not a stable interface.
 *
 * Shape: a schema is compiled once (sch_json_compile.c, sch_json_ref.c)
 * into a graph of sch__json_node_t: every keyword pre-parsed, regexes
 * compiled (sch_json_regex*.c, our own ECMA-262 engine), $ref and static
 * $dynamicRef targets resolved to node pointers, enum/const kept as json_t.
 * Validation (sch_json_validate.c, sch_json_check.c) walks that graph with a
 * per-call context on the caller's stack and never touches the schema text
 * again. The compiled object is immutable after compile: any number of
 * threads may validate against it at once.
 *
 * Bounds, because schema text comes from the cluster registry and payloads
 * from devices: schema nesting, evaluation depth, remote documents, regex
 * program size and regex work per match are all capped (SCH_JSON_MAX_*),
 * and exceeding a cap is a clear error, never a crash or a silent pass.
 */
#ifndef SCH_JSON_H
#define SCH_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

typedef struct sch__json sch__json_t;

/* ---- entry points (wrapped by sch_validator.c) ----------------------- */

/* Compiles JSON Schema text; the dialect comes from "$schema" and is 2020-12
 * when absent. Returns 0 and sets *out, or TB_ESCHEMA / TB_EUNSUPPORTED with
 * *out NULL and err filled. `opts` may be NULL; opts->resolve is only called
 * during this function. */
int sch__json_compile(const char *text, size_t len, const sch_opts_t *opts,
                      sch__json_t **out, char *err, size_t errlen);

/* Parses the payload with jansson (duplicate keys rejected, NUL allowed,
 * integers beyond int64 read as doubles) and validates it. Returns 0 when
 * valid, TB_EINVALID with err filled when not (including when the payload
 * is not JSON). */
int sch__json_validate(const sch__json_t *s, const uint8_t *payload, size_t len,
                       char *err, size_t errlen);

/* Validates an already parsed instance. Same returns as sch__json_validate. */
int sch__json_validate_value(const sch__json_t *s, const json_t *instance,
                             char *err, size_t errlen);

void sch__json_free(sch__json_t *s);

/* ---- dialects and limits ---------------------------------------------- */

typedef enum { SCH_JSON_DRAFT7 = 7, SCH_JSON_DRAFT2020 = 2020 } sch_json_draft_t;

/* Like sch__json_compile, with the dialect to assume when "$schema" is
 * absent (the suite runner uses it for draft 7). */
int sch__json_compile_draft(const char *text, size_t len, const sch_opts_t *opts,
                            sch_json_draft_t default_draft, sch__json_t **out,
                            char *err, size_t errlen);

#define SCH_JSON_MAX_SCHEMA_DEPTH 128   /* nesting of subschemas in one document */
#define SCH_JSON_MAX_EVAL_DEPTH   256   /* nested subschema evaluations at validate */
#define SCH_JSON_MAX_EVAL_STEPS   10000000 /* subschema evaluations per validation */
#define SCH_JSON_MAX_DOCS         64    /* documents: root + remotes + metaschemas */
#define SCH_JSON_MAX_INST_DEPTH   2048  /* instance nesting (jansson's parser cap) */

/* ---- URIs and JSON Pointers (sch_json_uri.c) --------------------------- */

/* Resolves `ref` against the absolute URI `base` (RFC 3986 section 5.2,
 * dot segments removed). Returns a new string (caller frees) that keeps the
 * reference's fragment, if any. */
char *sch__json_uri_resolve(const char *base, const char *ref);
/* Length of the URI without its fragment ('#' and after). */
size_t sch__json_uri_nofrag_len(const char *uri);
/* Percent-decodes s[0..len) into a new NUL-terminated string (*outlen set);
 * returns NULL on a malformed escape. */
char *sch__json_pct_decode(const char *s, size_t len, size_t *outlen);
/* Follows a JSON Pointer ("" or "/a/b", ~0 ~1 unescaped) from root.
 * Returns the target or NULL. */
json_t *sch__json_pointer_get(json_t *root, const char *ptr, size_t len);

/* ---- JSON equality and hashing (sch_json_equal.c) ---------------------- */

/* A JSON number as the schema or instance carries it. */
typedef struct sch__json_num {
    bool is_int;
    int64_t i;
    double d;
} sch__json_num_t;

sch__json_num_t sch__json_num(const json_t *v); /* v must be a number */
/* Exact comparison of two numbers, integer or double: <0, 0, >0. */
int sch__json_num_cmp(sch__json_num_t a, sch__json_num_t b);
/* True when the number has no fractional part (1.0 is an integer). */
bool sch__json_num_is_integral(sch__json_num_t a);
bool sch__json_num_multiple_of(sch__json_num_t x, sch__json_num_t m);
/* Formats a number the shortest way that reads back the same. */
void sch__json_num_format(sch__json_num_t a, char *buf, size_t len);

/* JSON equality: numbers by value (1 == 1.0), objects regardless of key
 * order. Sets *too_deep (and returns false) past SCH_JSON_MAX_INST_DEPTH. */
bool sch__json_equal(const json_t *a, const json_t *b, bool *too_deep);
/* True when every item differs from every other; otherwise *di, *dj name a
 * duplicate pair. Expected O(n) (hashing), not O(n^2). */
bool sch__json_unique(const json_t *array, size_t *di, size_t *dj, bool *too_deep);

/* ---- regular expressions (sch_json_regex*.c) --------------------------- */

typedef struct sch__json_regex sch__json_regex_t;

/* Compiles an ECMA-262 pattern (unicode mode; see sch_json_regex.c for the
 * dialect). Returns 0, TB_ESCHEMA for a syntax error, TB_EUNSUPPORTED for
 * valid ECMA syntax this engine does not run (e.g. backreferences); err
 * says which and where. */
int sch__json_regex_compile(const char *src, size_t len, sch__json_regex_t **out,
                            char *err, size_t errlen);
/* Searches s[0..len) (UTF-8) for a match anywhere. Returns 1 (match),
 * 0 (no match) or TB_EFULL when the work bound was reached. */
int sch__json_regex_search(const sch__json_regex_t *re, const char *s, size_t len);
void sch__json_regex_free(sch__json_regex_t *re);

/* Unicode general categories (sch_json_ucd.c, generated). */
uint32_t sch__json_ucd_category_bit(uint32_t cp);
/* Mask of categories named by a \p{...} value (e.g. "L", "Letter", "Nd",
 * "digit", "gc=Lu"); false when unknown. */
bool sch__json_ucd_lookup(const char *name, size_t len, uint32_t *mask);

/* ---- formats (sch_json_format.c) --------------------------------------- */

typedef enum {
    SCH_JSON_FMT_NONE = 0,
    SCH_JSON_FMT_UNKNOWN,       /* annotation only, never asserted */
    SCH_JSON_FMT_DATE_TIME,
    SCH_JSON_FMT_DATE,
    SCH_JSON_FMT_TIME,
    SCH_JSON_FMT_DURATION,
    SCH_JSON_FMT_EMAIL,
    SCH_JSON_FMT_HOSTNAME,
    SCH_JSON_FMT_IPV4,
    SCH_JSON_FMT_IPV6,
    SCH_JSON_FMT_URI,
    SCH_JSON_FMT_URI_REFERENCE,
    SCH_JSON_FMT_IRI,
    SCH_JSON_FMT_IRI_REFERENCE,
    SCH_JSON_FMT_UUID,
    SCH_JSON_FMT_JSON_POINTER,
    SCH_JSON_FMT_REL_JSON_POINTER,
    SCH_JSON_FMT_REGEX,
    SCH_JSON_FMT_URI_TEMPLATE,
    SCH_JSON_FMT_IDN_EMAIL,
} sch_json_format_t;

sch_json_format_t sch__json_format_lookup(const char *name);
const char *sch__json_format_name(sch_json_format_t f);
bool sch__json_format_check(sch_json_format_t f, const char *s, size_t len);

/* ---- embedded metaschemas (sch_json_meta.c) ---------------------------- */

/* The text of a standard metaschema by URI (without fragment), or NULL. */
const char *sch__json_meta_text(const char *uri, size_t urilen, size_t *len);

/* ---- the compiled form (sch_json_compile.c, sch_json_ref.c) ------------ */

typedef struct sch__json_node sch__json_node_t;

/* Vocabularies (2020-12); draft 7 schemas get all of them. */
enum {
    SCH_JSON_VOC_APPLICATOR  = 1u << 0,
    SCH_JSON_VOC_UNEVALUATED = 1u << 1,
    SCH_JSON_VOC_VALIDATION  = 1u << 2,
    SCH_JSON_VOC_FORMAT_ASSERT = 1u << 3,
    SCH_JSON_VOC_ALL_DEFAULT = (1u << 0) | (1u << 1) | (1u << 2),
};

typedef struct sch__json_anchor {
    const char *name;
    size_t len;
    json_t *target;               /* the schema object carrying the anchor */
    bool dynamic;                 /* $dynamicAnchor (also usable by $ref) */
    const sch__json_node_t *node; /* dynamic anchors: compiled at compile end */
} sch__json_anchor_t;

/* A schema resource: a document root or a subschema with an "$id". */
typedef struct sch__json_res {
    char *uri;                    /* absolute, no fragment */
    json_t *root;
    sch_json_draft_t draft;
    unsigned vocab;
    sch__json_anchor_t *anchors;
    size_t nanchors, capanchors;
} sch__json_res_t;

/* Type bits for "type". */
enum {
    SCH_JSON_T_NULL = 1, SCH_JSON_T_BOOLEAN = 2, SCH_JSON_T_OBJECT = 4, SCH_JSON_T_ARRAY = 8,
    SCH_JSON_T_NUMBER = 16, SCH_JSON_T_STRING = 32, SCH_JSON_T_INTEGER = 64,
};

/* Presence bits for keywords whose value alone cannot say "absent". */
enum {
    SCH_JSON_HAS_MULTIPLE_OF = 1u << 0,
    SCH_JSON_HAS_MAXIMUM     = 1u << 1,
    SCH_JSON_HAS_EXCL_MAX    = 1u << 2,
    SCH_JSON_HAS_MINIMUM     = 1u << 3,
    SCH_JSON_HAS_EXCL_MIN    = 1u << 4,
    SCH_JSON_HAS_MAX_LENGTH  = 1u << 5,
    SCH_JSON_HAS_MIN_LENGTH  = 1u << 6,
    SCH_JSON_HAS_MAX_ITEMS   = 1u << 7,
    SCH_JSON_HAS_MIN_ITEMS   = 1u << 8,
    SCH_JSON_HAS_MAX_PROPS   = 1u << 9,
    SCH_JSON_HAS_MIN_PROPS   = 1u << 10,
    SCH_JSON_HAS_MAX_CONTAINS = 1u << 11,
    SCH_JSON_HAS_MIN_CONTAINS = 1u << 12,
    SCH_JSON_HAS_CONST       = 1u << 13,
    SCH_JSON_HAS_UNIQUE      = 1u << 14,
};

typedef struct sch__json_strs {
    const char **s;
    size_t *len;
    size_t n;
} sch__json_strs_t;

typedef struct sch__json_prop {
    const char *name;
    size_t len;
    const sch__json_node_t *node;
} sch__json_prop_t;

typedef struct sch__json_patprop {
    const sch__json_regex_t *re;
    const char *src;
    const sch__json_node_t *node;
} sch__json_patprop_t;

/* dependentRequired / dependentSchemas / draft 7 "dependencies". */
typedef struct sch__json_dep {
    const char *name;
    size_t len;
    const sch__json_node_t *node; /* schema form, or NULL */
    sch__json_strs_t req;         /* property-list form */
} sch__json_dep_t;

typedef struct sch__json_nodes {
    const sch__json_node_t **v;
    size_t n;
} sch__json_nodes_t;

typedef enum { SCH_JSON_NODE_TRUE, SCH_JSON_NODE_FALSE, SCH_JSON_NODE_OBJECT } sch_json_node_kind_t;

struct sch__json_node {
    sch_json_node_kind_t kind;
    uint32_t has;                 /* SCH_JSON_HAS_* */
    uint8_t types;                /* SCH_JSON_T_*; 0 = no "type" */
    sch_json_format_t format;
    bool format_assert;
    const sch__json_res_t *res;   /* the resource it belongs to (dynamic scope) */
    const char *loc;              /* "<resource uri>#<pointer>", for messages */

    const sch__json_node_t *ref;
    const sch__json_node_t *dynref;  /* $dynamicRef's static target */
    const char *dyn_anchor;          /* non-NULL: search the dynamic scope */
    size_t dyn_anchor_len;

    const json_t *konst;
    const json_t *enm;
    sch__json_num_t multiple_of, maximum, excl_max, minimum, excl_min;
    uint64_t max_length, min_length, max_items, min_items;
    uint64_t max_props, min_props, max_contains, min_contains;
    const sch__json_regex_t *pattern;
    const char *pattern_src;

    sch__json_nodes_t prefix;     /* prefixItems (2020-12), array "items" (7) */
    const sch__json_node_t *items;/* after the prefix (7: additionalItems or schema "items") */
    const sch__json_node_t *contains;
    const sch__json_node_t *uneval_items;

    sch__json_prop_t *props;      /* sorted by (len, bytes) for binary search */
    size_t nprops;
    sch__json_patprop_t *patprops;
    size_t npatprops;
    const sch__json_node_t *addl_props;
    const sch__json_node_t *prop_names;
    sch__json_strs_t required;
    sch__json_dep_t *deps;
    size_t ndeps;
    const sch__json_node_t *uneval_props;

    sch__json_nodes_t all_of, any_of, one_of;
    const sch__json_node_t *not_, *if_, *then_, *else_;
    uint32_t cid;                 /* compile-time index (cycle check) */
};

/* A small bump allocator: every node and keyword array of one compiled
 * schema lives in it and goes with one free. */
typedef struct sch__json_arena_chunk sch__json_arena_chunk_t;
typedef struct sch__json_arena {
    sch__json_arena_chunk_t *head;
} sch__json_arena_t;
void *sch__json_arena_alloc(sch__json_arena_t *a, size_t n); /* zeroed */
char *sch__json_arena_strndup(sch__json_arena_t *a, const char *s, size_t n);
void sch__json_arena_free(sch__json_arena_t *a);

struct sch__json {
    sch__json_arena_t arena;
    const sch__json_node_t *root;
    json_t **docs;                /* owned references */
    size_t ndocs;
    sch__json_res_t **res;        /* every resource, for dynamic anchors */
    size_t nres, capres;
    sch__json_regex_t **regexes;  /* owned */
    size_t nregexes, capregexes;
};

extern const sch__json_node_t sch__json_node_true, sch__json_node_false;

/* ---- validation (sch_json_validate.c, sch_json_check.c) ---------------- */

/* One step of the instance path: an object key or an array index. */
typedef struct sch__json_seg {
    const char *key;              /* NULL for an index */
    size_t len;                   /* key length, or the index */
} sch__json_seg_t;

/* Per-call validation state, on the caller's stack: the compiled schema is
 * never written to. */
typedef struct sch__json_vctx {
    char *err;
    size_t errlen;
    bool err_set;                 /* the first error is written */
    bool abort;                   /* a bound was hit: the instance is invalid */
    unsigned quiet;               /* > 0 inside anyOf/oneOf/not/if/contains */
    unsigned depth;
    uint64_t steps;               /* subschema evaluations so far */
    size_t npath, nscope;
    sch__json_seg_t path[SCH_JSON_MAX_EVAL_DEPTH + 2];
    const sch__json_res_t *scope[SCH_JSON_MAX_EVAL_DEPTH + 2]; /* dynamic scope */
} sch__json_vctx_t;

/* Evaluated properties or items of one instance (for unevaluated*): one
 * flag per member, by position. */
typedef struct sch__json_ev {
    size_t n;
    uint8_t *b;
    uint8_t small[32];
} sch__json_ev_t;

/* Applies node n to instance x. `ev` (may be NULL) collects what n
 * evaluated of x; `kw` names the keyword that applied n (for a false
 * schema's message). Returns true when valid. */
bool sch__json_eval(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev,
                    const char *kw);
bool sch__json_eval_object(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev);
bool sch__json_eval_array(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x, sch__json_ev_t *ev);
bool sch__json_eval_scalar(sch__json_vctx_t *c, const sch__json_node_t *n, const json_t *x);

/* Records "<instance path>: <message>" as the error unless one is already
 * recorded or the context is quiet. */
void sch__json_verr(sch__json_vctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with one more path step (the missing property's name). */
void sch__json_verr_key(sch__json_vctx_t *c, const char *key, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A bound was hit: the message replaces any other, even when quiet, and the
 * whole validation fails. */
void sch__json_vabort(sch__json_vctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Cuts a string truncated by snprintf back to a whole UTF-8 character, so
 * a capped message is still valid UTF-8 for JSON logs. */
void sch__json_utf8_trim(char *s);
/* The length of s's longest prefix of at most max bytes that ends on a
 * whole UTF-8 character: quote long schema strings with "%.*s" and this. */
int sch__json_utf8_cut(const char *s, size_t max);

static inline void sch__json_push_key(sch__json_vctx_t *c, const char *key, size_t len)
{
    c->path[c->npath++] = (sch__json_seg_t){ key, len };
}
static inline void sch__json_push_index(sch__json_vctx_t *c, size_t i)
{
    c->path[c->npath++] = (sch__json_seg_t){ NULL, i };
}

/* ---- compile-time state (sch_json_compile.c, sch_json_ref.c) ----------- */

/* What the scan learnt about one schema object, and its node once made. */
typedef struct sch__json_loc {
    const json_t *key;
    const char *base;             /* absolute base URI (arena) */
    sch__json_res_t *res;
    const char *loc;              /* "<resource uri>#<pointer>" (arena) */
    sch__json_node_t *node;       /* NULL until node_for() makes it */
} sch__json_loc_t;

typedef struct sch__json_alias {
    char *uri;
    sch__json_res_t *res;
} sch__json_alias_t;

typedef struct sch__json_cstate {
    sch__json_t *s;
    const sch_opts_t *opts;
    sch_json_draft_t default_draft;
    char *err;
    size_t errlen;
    int rc;                       /* first failure */
    sch__json_loc_t *tab;         /* open addressing on the json_t pointer */
    size_t cap, count;
    json_t **pending;             /* objects whose nodes await filling */
    size_t npending, cappending;
    sch__json_alias_t *alias;     /* retrieval URIs of documents with an $id */
    size_t nalias, capalias;
    sch__json_node_t **nodes;     /* every object node, by cid */
    size_t nnodes, capnodes;
    unsigned meta_depth;          /* custom metaschema chain, bounded */
} sch__json_cstate_t;

/* The default base URI of a schema without "$id". */
#define SCH_JSON_DEFAULT_BASE "tributary:/root.json"

/* Records the first failure (later ones are dropped); returns rc. */
int sch__json_cfail(sch__json_cstate_t *cs, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

sch__json_loc_t *sch__json_loc_get(sch__json_cstate_t *cs, const json_t *j);
/* Registers the resources, anchors and scan records of a document. */
int sch__json_scan_doc(sch__json_cstate_t *cs, json_t *root, const char *retrieval_uri);

/* Where a $ref or $dynamicRef leads. */
typedef struct sch__json_target {
    json_t *json;                 /* the schema (object or boolean) */
    sch__json_res_t *res;
    const char *anchor;           /* plain-name fragment, or NULL */
    size_t anchor_len;
    bool dynamic;                 /* the anchor is a $dynamicAnchor */
} sch__json_target_t;

/* Resolves `ref` against `base`, loading a remote document through
 * opts->resolve or the embedded metaschemas if needed. */
int sch__json_resolve(sch__json_cstate_t *cs, const char *base, const char *ref,
                      sch__json_target_t *t);
/* The node for a schema object or boolean, made (and queued for filling)
 * on first sight; NULL with cs->rc set when j is not a schema. `what` names
 * the keyword for the message. */
const sch__json_node_t *sch__json_node_for(sch__json_cstate_t *cs, json_t *j, const char *what);
/* Fills a node from its schema object, keyword by keyword (sch_json_keywords.c). */
int sch__json_fill(sch__json_cstate_t *cs, sch__json_node_t *n, json_t *j);
/* A location for messages, without the default base URI. */
const char *sch__json_loc_short(const char *loc);

/* Parses schema text (duplicate keys rejected, NUL allowed, big integers as
 * doubles). Returns NULL with jerr filled on failure. */
json_t *sch__json_parse(const char *text, size_t len, json_error_t *jerr);

/* Looks up a dynamic anchor in a resource; NULL when it has none by that name. */
const sch__json_node_t *sch__json_res_dynamic(const sch__json_res_t *r, const char *name, size_t len);

#endif
