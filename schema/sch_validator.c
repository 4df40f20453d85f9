/*
 * sch_validator.c: the one validator type, dispatching on its kind.
 *
 * A validator is compiled once (on the loop thread, from a registry update),
 * never changes afterwards, and is shared by every topic with the same
 * schema and by in-flight validations on other threads; so the refcount is
 * atomic and nothing in it is mutable after sch_compile returns. Topics swap
 * to a new validator by taking a reference to it and dropping the old one;
 * the old one is freed when its last holder lets go.
 *
 * Bytes, String and Number carry no compiled state (sch_simple.c); Avro and
 * JSON Schema hold their compiled form (sch_avro.h, sch_json.h). Protobuf is
 * refused here, at compile time, with a clear message: the caller marks the
 * topic not ready instead of letting payloads through unchecked.
 */
#include "schema/schema.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "base/base.h"
#include "schema/sch_avro.h"
#include "schema/sch_internal.h"
#include "schema/sch_json.h"

struct sch_validator {
    atomic_uint refs;
    sch_kind_t kind;
    union {
        sch__avro_t *avro;
        sch__json_t *json;
    } u;
};

const char *sch_kind_name(sch_kind_t kind)
{
    switch (kind) {
    case SCH_BYTES: return "Bytes";
    case SCH_STRING: return "String";
    case SCH_NUMBER: return "Number";
    case SCH_JSON_SCHEMA: return "JsonSchema";
    case SCH_AVRO: return "Avro";
    case SCH_PROTOBUF: return "Protobuf";
    }
    return "unknown";
}

int sch_compile(sch_kind_t kind, const char *text, size_t len, const sch_opts_t *opts,
                sch_validator_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sch__avro_t *avro = NULL;
    sch__json_t *json = NULL;
    int rc;
    switch (kind) {
    case SCH_BYTES:
    case SCH_STRING:
    case SCH_NUMBER:
        break;
    case SCH_AVRO:
        rc = sch__avro_compile(text, len, opts, &avro, err, errlen);
        if (rc)
            return rc;
        break;
    case SCH_JSON_SCHEMA:
        rc = sch__json_compile(text, len, opts, &json, err, errlen);
        if (rc)
            return rc;
        break;
    case SCH_PROTOBUF:
        sch__errf(err, errlen, "Protobuf schemas are not supported yet; topic not ready");
        return TB_EUNSUPPORTED;
    default:
        sch__errf(err, errlen, "unknown schema kind %d", (int)kind);
        return TB_EUNSUPPORTED;
    }
    sch_validator_t *v = tb_calloc(1, sizeof *v);
    atomic_init(&v->refs, 1);
    v->kind = kind;
    if (kind == SCH_AVRO)
        v->u.avro = avro;
    else if (kind == SCH_JSON_SCHEMA)
        v->u.json = json;
    *out = v;
    return 0;
}

int sch_validate(const sch_validator_t *v, const uint8_t *payload, size_t len, char *err,
                 size_t errlen)
{
    switch (v->kind) {
    case SCH_AVRO:
        return sch__avro_validate(v->u.avro, payload, len, err, errlen);
    case SCH_JSON_SCHEMA:
        return sch__json_validate(v->u.json, payload, len, err, errlen);
    default:
        return sch__simple_validate(v->kind, payload, len, err, errlen);
    }
}

sch_validator_t *sch_validator_ref(sch_validator_t *v)
{
    if (v)
        atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    return v;
}

void sch_validator_unref(sch_validator_t *v)
{
    if (!v)
        return;
    /* acq_rel: the last holder must see every other holder's use finished. */
    if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (v->kind == SCH_AVRO)
        sch__avro_free(v->u.avro);
    else if (v->kind == SCH_JSON_SCHEMA)
        sch__json_free(v->u.json);
    free(v);
}

sch_kind_t sch_validator_kind(const sch_validator_t *v)
{
    return v->kind;
}

const struct sch__avro *sch__validator_avro(const sch_validator_t *v)
{
    return v && v->kind == SCH_AVRO ? v->u.avro : NULL;
}

const struct sch__json *sch__validator_json(const sch_validator_t *v)
{
    return v && v->kind == SCH_JSON_SCHEMA ? v->u.json : NULL;
}
