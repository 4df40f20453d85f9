/*
 * sch_registry.c: the edge's cache of the cluster's schema registry.
 *
 * One entry per subject holding the schema's identity (fingerprint, or the
 * envelope bytes when there is none), id, version, kind, and either a
 * compiled validator or the reason it failed (schema.h states the rules:
 * compile once per fingerprint, replace on a new one, fail closed).
 *
 * Entries sit in a flat array searched linearly: an edge has as many
 * subjects as topic mappings (tens), lookups happen when a topic is set up
 * or its schema changes, never per message (topics keep their validator
 * reference), so a hash table would buy nothing.
 *
 * The registry is owned by the loop thread; only the validators it hands
 * out cross threads, and they are immutable and atomically refcounted.
 */
#include "schema/schema.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_internal.h"

typedef struct entry {
    char *subject;
    char *fingerprint;       /* NULL when neither ResolvedSchema nor the envelope had one */
    uint8_t *definition;     /* the envelope bytes, to identify a schema without fingerprint */
    size_t definition_len;
    uint64_t schema_id;
    uint32_t schema_version;
    sch_kind_t kind;
    sch_validator_t *validator; /* NULL when failed */
    char *reason;            /* why it failed; NULL when ready */
} entry_t;

struct sch_registry {
    sch_opts_t opts;
    entry_t *entries;
    size_t n, cap;
};

int sch_kind_from_type(const char *schema_type, sch_kind_t *kind)
{
    static const struct { const char *name; sch_kind_t kind; } types[] = {
        { "bytes", SCH_BYTES },   { "string", SCH_STRING },
        { "number", SCH_NUMBER }, { "avro", SCH_AVRO },
        { "json_schema", SCH_JSON_SCHEMA }, { "protobuf", SCH_PROTOBUF },
    };
    for (size_t i = 0; schema_type && i < TB_ARRAY_LEN(types); i++) {
        if (!strcmp(schema_type, types[i].name)) {
            *kind = types[i].kind;
            return 0;
        }
    }
    return -EINVAL;
}

sch_registry_t *sch_registry_new(const sch_opts_t *opts)
{
    sch_registry_t *r = tb_calloc(1, sizeof *r);
    if (opts)
        r->opts = *opts;
    return r;
}

static void entry_clear(entry_t *e)
{
    free(e->fingerprint);
    free(e->definition);
    free(e->reason);
    sch_validator_unref(e->validator);
    e->fingerprint = NULL;
    e->definition = NULL;
    e->reason = NULL;
    e->validator = NULL;
}

void sch_registry_free(sch_registry_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        entry_clear(&r->entries[i]);
        free(r->entries[i].subject);
    }
    free(r->entries);
    free(r);
}

static entry_t *find(const sch_registry_t *r, const char *subject)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->entries[i].subject, subject))
            return &r->entries[i];
    return NULL;
}

static bool same_schema(const entry_t *e, const char *fp, const uint8_t *def, size_t len)
{
    if (e->fingerprint && fp)
        return !strcmp(e->fingerprint, fp);
    return e->definition_len == len && (len == 0 || !memcmp(e->definition, def, len));
}

/* Envelope -> validator, or the reason it cannot be had. On failure *reason
 * is a new string; *fp_out is the envelope's fingerprint (caller frees). */
static int compile_def(const sch_registry_t *r, const sch_resolved_t *rs, sch_kind_t *kind,
                       sch_validator_t **v, char **fp_out, char **reason)
{
    char why[512] = "";
    char *raw = NULL;
    *v = NULL;
    *reason = NULL;
    /* The kind to report if the envelope does not even parse. */
    if (sch_kind_from_type(rs->schema_type, kind) != 0)
        *kind = SCH_BYTES;
    int rc = sch_envelope_parse(rs->definition, rs->definition_len, kind, &raw, fp_out, why,
                                sizeof why);
    sch_kind_t typed;
    if (rc == 0 && rs->schema_type && rs->schema_type[0]) {
        if (sch_kind_from_type(rs->schema_type, &typed)) {
            sch__errf(why, sizeof why, "unknown schema_type \"%.40s\"", rs->schema_type);
            rc = TB_EMALFORMED;
        } else if (typed != *kind) {
            sch__errf(why, sizeof why, "schema_type \"%s\" disagrees with the envelope (%s)",
                      rs->schema_type, sch_kind_name(*kind));
            rc = TB_EMALFORMED;
        }
    }
    if (rc == 0)
        rc = sch_compile(*kind, raw, raw ? strlen(raw) : 0, &r->opts, v, why, sizeof why);
    free(raw);
    if (rc)
        *reason = tb_strdup(why[0] ? why : tb_strerror(rc));
    return rc;
}

int sch_registry_apply(sch_registry_t *r, const sch_resolved_t *rs, char *err, size_t errlen)
{
    if (!rs->subject || !rs->subject[0]) {
        sch__errf(err, errlen, "resolved schema without a subject");
        return -EINVAL;
    }
    const char *given_fp = rs->fingerprint && rs->fingerprint[0] ? rs->fingerprint : NULL;
    entry_t *e = find(r, rs->subject);
    if (e && same_schema(e, given_fp, rs->definition, rs->definition_len)) {
        /* Same schema: nothing to compile; the cluster may still renumber it. */
        e->schema_id = rs->schema_id;
        e->schema_version = rs->schema_version;
        if (e->reason)
            sch__errf(err, errlen, "%s", e->reason);
        return e->validator ? 0 : TB_ENOTREADY;
    }

    sch_kind_t kind = SCH_BYTES;
    sch_validator_t *v;
    char *env_fp = NULL, *reason;
    int rc = compile_def(r, rs, &kind, &v, &env_fp, &reason);

    if (!e) {
        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 8;
            r->entries = tb_realloc(r->entries, r->cap * sizeof *r->entries);
        }
        e = &r->entries[r->n++];
        memset(e, 0, sizeof *e);
        e->subject = tb_strdup(rs->subject);
    }
    entry_clear(e); /* the old validator lives on in whoever still holds it */
    e->fingerprint = given_fp ? tb_strdup(given_fp) : env_fp;
    if (given_fp)
        free(env_fp);
    e->definition = tb_malloc(rs->definition_len ? rs->definition_len : 1);
    if (rs->definition_len)
        memcpy(e->definition, rs->definition, rs->definition_len);
    e->definition_len = rs->definition_len;
    e->schema_id = rs->schema_id;
    e->schema_version = rs->schema_version;
    e->kind = kind;
    e->validator = v;
    e->reason = reason;
    if (rc) {
        tb_warn("schema not ready", TB_S("subject", rs->subject),
                TB_U("schema_id", rs->schema_id), TB_U("schema_version", rs->schema_version),
                TB_S("reason", reason), TB_ERR(rc));
        sch__errf(err, errlen, "%s", reason);
    }
    return rc;
}

int sch_registry_lookup(const sch_registry_t *r, const char *subject, sch_lookup_t *out,
                        char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const entry_t *e = subject ? find(r, subject) : NULL;
    if (!e) {
        sch__errf(err, errlen, "no schema known for subject \"%.80s\"", subject ? subject : "");
        return -ENOENT;
    }
    out->schema_id = e->schema_id;
    out->schema_version = e->schema_version;
    out->kind = e->kind;
    if (!e->validator) {
        sch__errf(err, errlen, "%s", e->reason ? e->reason : "schema failed");
        return TB_ENOTREADY;
    }
    out->validator = sch_validator_ref(e->validator);
    return 0;
}

int sch_registry_remove(sch_registry_t *r, const char *subject)
{
    entry_t *e = subject ? find(r, subject) : NULL;
    if (!e)
        return -ENOENT;
    entry_clear(e);
    free(e->subject);
    *e = r->entries[--r->n]; /* order does not matter */
    return 0;
}
