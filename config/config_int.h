/* config_int.h: the key table shared by config/'s files (internal). */
#ifndef CFG_CONFIG_INT_H
#define CFG_CONFIG_INT_H

#include "config/config.h"

typedef enum {
    CFG__STR,      /* char * */
    CFG__BOOL,     /* bool */
    CFG__U32,      /* uint32_t */
    CFG__U64,      /* uint64_t */
    CFG__BYTES,    /* uint64_t; accepts 123, 64KiB, 16MiB, 1GiB */
    CFG__MS,       /* uint32_t milliseconds */
    CFG__ENUM,     /* int, index into enums[] */
    CFG__ADDR,     /* char *, host:port or [v6]:port */
    CFG__URL,      /* char *, http:// or https:// */
    CFG__ATTRS,    /* cfg_attr_t list (mapping only) */
    CFG__CAPVALS,  /* cfg_capvals_t list (mapping only) */
    CFG__MAPPINGS, /* cfg_mapping_t list */
    CFG__LISTENERS, /* cfg_listener_t list */
    CFG__SPACE,    /* cfg_space_t; "bytes or %": 64MiB (min..max bytes) or 2% (one decimal, 0%..50%) */
    CFG__DURATION, /* uint64_t milliseconds; accepts 500ms, 45s, 30m, 12h, 7d (a bare number is ms) */
    CFG__OUTPUTS,  /* cfg_output_t list */
    CFG__STRLIST,  /* char ** + count (an output's topics: the count field follows the pointer) */
} cfg__type_t;

/* The largest share of a file system a CFG__SPACE value may name, in tenths of a percent. */
#define CFG__SPACE_MAX_PERMILLE 500u

enum {
    CFG__F_SECRET   = 1 << 0, /* masked in output, never logged */
    CFG__F_REQUIRED = 1 << 1,
    CFG__F_DANUBE   = 1 << 2, /* a key of Danube's own edge.yaml */
    /* A topic template (outputs[].remote_topic, outputs[].device): ${topic} and
     * ${upstream} are its placeholders, not environment variables. */
    CFG__F_TEMPLATE = 1 << 3,
    /* outputs[] keys: the kinds that take the key (a key of another kind is an error) */
    CFG__F_K_DANUBE = 1 << 4,
    CFG__F_K_MQTT   = 1 << 5,
    CFG__F_K_SPB    = 1 << 6,
    /* Reload class LIVE: a reload applies a change to it (cfg_reload_class;
     * without the flag a change needs a restart). */
    CFG__F_RELOAD   = 1 << 7,
};

typedef struct cfg__key {
    const char *path;           /* "wal.segment_bytes"; relative for mapping and listener keys */
    cfg__type_t type;
    size_t off;                 /* offset in cfg_t (or cfg_mapping_t, cfg_listener_t) */
    const char *def;            /* default as YAML text; NULL = none */
    uint64_t min, max;          /* numeric bounds (inclusive) */
    const char *const *enums;   /* CFG__ENUM values, NULL-terminated */
    unsigned flags;
    const char *desc;
} cfg__key_t;

extern const cfg__key_t cfg__keys[];
extern const size_t cfg__nkeys;
extern const cfg__key_t cfg__mapping_keys[];
extern const size_t cfg__nmapping_keys;
/* The keys of one mqtt.listeners entry ("address", "tls.cert_file", ...). */
extern const cfg__key_t cfg__listener_keys[];
extern const size_t cfg__nlistener_keys;
/* The keys of one outputs entry ("name", "tls.ca_file", ...), kinds in flags. */
extern const cfg__key_t cfg__output_keys[];
extern const size_t cfg__noutputs_keys;
extern const char *const cfg__output_kinds[]; /* cfg_output_kind_t names, NULL-terminated */

/* The implied output (no `outputs` section): allocates cfg->outputs with it. */
void cfg__implied_output(cfg_t *cfg);
void cfg__free_outputs(cfg_t *cfg);

/* Checks a template's syntax (placeholders known and closed, no wildcard
 * in its literal text, not made of pieces that can all be empty); level:
 * one topic level (no '/', only ${N} placeholders, which may stand alone). The router compiles it
 * again against the mappings (gateway/router/router.h). Returns NULL or
 * why it is wrong (static text). */
const char *cfg__template_check(const char *t, bool level);
/* Checks an MQTT topic filter's shape; returns NULL or why not (static). */
const char *cfg__filter_check(const char *f);

const char *cfg__type_name(const cfg__key_t *k);

/* config_defaults.c: writes every row's default into cfg (rows without one
 * are left as they are: zero in a calloc'd cfg_t). The one code path that
 * applies defaults, for a file being loaded and for cfg_defaults(). */
void cfg__set_defaults(cfg_t *cfg);

/* config_value.c */
int cfg__set_scalar(const cfg__key_t *k, void *base, const char *s, char *msg, size_t msglen);
/* template: a CFG__F_TEMPLATE key, where ${topic} and ${upstream} stay as they are */
char *cfg__expand_env(const char *s, char *const *envp, bool template, char *msg, size_t msglen);

/* config_check.c: cross-key rules after parsing. `locate` gives the
 * 1-based line and column of a mapping's field (field NULL: the mapping
 * itself; idx -1: the top-level key named by field), or 0 when unknown.
 * On failure fills e (text "file:line:col: key: msg") and returns TB_ECONFIG. */
typedef void (*cfg__locate_fn)(void *arg, long idx, const char *field, int *line, int *col);
int cfg__check(const cfg_t *cfg, cfg__locate_fn locate, void *arg, cfg_err_t *e);

/* Levenshtein distance, for "did you mean". */
size_t cfg__distance(const char *a, const char *b);
#endif
