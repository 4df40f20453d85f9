/*
 * test_registry.c: the registry cache: apply a ResolvedSchema, look up by
 * subject, share one validator per subject+fingerprint, replace on a new
 * fingerprint (schema evolution), fail closed on a schema that does not
 * compile.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "base/base.h"
#include "schema/schema.h"
#include "unit/schema/helper_avro.h"

/* v1: {id: int}; v2 adds a required string field. */
#define ENV_V1 "{\"Avro\":{\"raw_schema\":\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"R\\\"," \
               "\\\"fields\\\":[{\\\"name\\\":\\\"id\\\",\\\"type\\\":\\\"int\\\"}]}\"," \
               "\"fingerprint\":\"sha256:v1\"}}"
#define ENV_V2 "{\"Avro\":{\"raw_schema\":\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"R\\\"," \
               "\\\"fields\\\":[{\\\"name\\\":\\\"id\\\",\\\"type\\\":\\\"int\\\"}," \
               "{\\\"name\\\":\\\"site\\\",\\\"type\\\":\\\"string\\\"}]}\"," \
               "\"fingerprint\":\"sha256:v2\"}}"
#define ENV_BAD "{\"Avro\":{\"raw_schema\":\"{\\\"type\\\":\\\"recrod\\\"}\",\"fingerprint\":\"sha256:bad\"}}"

static char err[512];

static sch_resolved_t resolved(const char *subject, uint64_t id, uint32_t version,
                               const char *type, const char *def, const char *fp)
{
    return (sch_resolved_t){ .subject = subject, .schema_id = id, .schema_version = version,
                             .schema_type = type, .definition = (const uint8_t *)def,
                             .definition_len = strlen(def), .fingerprint = fp };
}

static int apply(sch_registry_t *r, sch_resolved_t rs)
{
    err[0] = '\0';
    return sch_registry_apply(r, &rs, err, sizeof err);
}

static sch_validator_t *lookup_ok(sch_registry_t *r, const char *subject, sch_lookup_t *out)
{
    cr_assert_eq(sch_registry_lookup(r, subject, out, err, sizeof err), 0, "%s", err);
    cr_assert_not_null(out->validator);
    return out->validator;
}

Test(registry, applied_schema_is_found_with_id_and_version)
{
    sch_registry_t *r = sch_registry_new(NULL);
    cr_assert_eq(apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1")), 0, "%s", err);
    sch_lookup_t l;
    sch_validator_t *v = lookup_ok(r, "telemetry", &l);
    cr_assert_eq(l.schema_id, 11);
    cr_assert_eq(l.schema_version, 1);
    cr_assert_eq(l.kind, SCH_AVRO);
    cr_assert_eq(h_check_bytes(v, "\x02", 1), 0);
    sch_validator_unref(v);
    sch_registry_free(r);
}

Test(registry, lookups_of_one_subject_share_one_validator)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1"));
    sch_lookup_t a, b;
    lookup_ok(r, "telemetry", &a);
    lookup_ok(r, "telemetry", &b);
    cr_assert_eq(a.validator, b.validator);
    sch_validator_unref(a.validator);
    sch_validator_unref(b.validator);
    sch_registry_free(r);
}

Test(registry, same_fingerprint_again_keeps_the_compiled_validator)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1"));
    sch_lookup_t a, b;
    lookup_ok(r, "telemetry", &a);
    cr_assert_eq(apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1")), 0);
    lookup_ok(r, "telemetry", &b);
    cr_assert_eq(a.validator, b.validator, "recompiled although the fingerprint did not change");
    sch_validator_unref(a.validator);
    sch_validator_unref(b.validator);
    sch_registry_free(r);
}

Test(registry, same_fingerprint_with_new_id_updates_the_id)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1"));
    apply(r, resolved("telemetry", 12, 3, "avro", ENV_V1, "sha256:v1"));
    sch_lookup_t l;
    lookup_ok(r, "telemetry", &l);
    cr_assert_eq(l.schema_id, 12);
    cr_assert_eq(l.schema_version, 3);
    sch_validator_unref(l.validator);
    sch_registry_free(r);
}

Test(registry, new_fingerprint_changes_the_verdict_for_the_same_payload)
{
    const uint8_t payload[] = { 0x02 }; /* {id: 1}: valid in v1, truncated in v2 */
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1"));
    sch_lookup_t l;
    lookup_ok(r, "telemetry", &l);
    cr_assert_eq(h_check_bytes(l.validator, payload, 1), 0);
    sch_validator_unref(l.validator);

    cr_assert_eq(apply(r, resolved("telemetry", 12, 2, "avro", ENV_V2, "sha256:v2")), 0, "%s", err);
    lookup_ok(r, "telemetry", &l);
    cr_assert_eq(l.schema_version, 2);
    cr_assert_eq(h_check_bytes(l.validator, payload, 1), TB_EINVALID);
    cr_assert(strstr(h_err(), "/site"), "%s", h_err());
    sch_validator_unref(l.validator);
    sch_registry_free(r);
}

Test(registry, replaced_validator_lives_on_for_its_holder)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1"));
    sch_lookup_t old;
    lookup_ok(r, "telemetry", &old);
    apply(r, resolved("telemetry", 12, 2, "avro", ENV_V2, "sha256:v2"));
    sch_registry_free(r);
    cr_assert_eq(h_check_bytes(old.validator, "\x02", 1), 0); /* still v1, still alive */
    sch_validator_unref(old.validator);
}

Test(registry, schema_that_fails_to_compile_is_recorded_not_ready_with_reason)
{
    sch_registry_t *r = sch_registry_new(NULL);
    cr_assert_eq(apply(r, resolved("telemetry", 11, 1, "avro", ENV_BAD, "sha256:bad")), TB_ESCHEMA);
    sch_lookup_t l;
    char why[512] = "";
    cr_assert_eq(sch_registry_lookup(r, "telemetry", &l, why, sizeof why), TB_ENOTREADY);
    cr_assert_null(l.validator);
    cr_assert_eq(l.schema_id, 11);
    cr_assert(strstr(why, "rejected by avro-c"), "%s", why);
    sch_registry_free(r);
}

Test(registry, failed_update_replaces_a_working_schema)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("telemetry", 11, 1, "avro", ENV_V1, "sha256:v1"));
    apply(r, resolved("telemetry", 12, 2, "avro", ENV_BAD, "sha256:bad"));
    sch_lookup_t l;
    cr_assert_eq(sch_registry_lookup(r, "telemetry", &l, err, sizeof err), TB_ENOTREADY);
    cr_assert_null(l.validator);
    sch_registry_free(r);
}

Test(registry, reapplying_a_failed_fingerprint_stays_not_ready)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("telemetry", 11, 1, "avro", ENV_BAD, "sha256:bad"));
    cr_assert_eq(apply(r, resolved("telemetry", 11, 1, "avro", ENV_BAD, "sha256:bad")), TB_ENOTREADY);
    cr_assert(strstr(err, "rejected by avro-c"), "%s", err);
    sch_registry_free(r);
}

Test(registry, protobuf_subject_is_not_ready_with_the_refusal)
{
    sch_registry_t *r = sch_registry_new(NULL);
    const char *env = "{\"Protobuf\":{\"raw_proto\":\"syntax = \\\"proto3\\\";\","
                      "\"message_name\":\"M\",\"fingerprint\":\"sha256:p\"}}";
    cr_assert_eq(apply(r, resolved("pb", 1, 1, "protobuf", env, "sha256:p")), TB_EUNSUPPORTED);
    sch_lookup_t l;
    char why[512] = "";
    cr_assert_eq(sch_registry_lookup(r, "pb", &l, why, sizeof why), TB_ENOTREADY);
    cr_assert_str_eq(why, "Protobuf schemas are not supported yet; topic not ready");
    sch_registry_free(r);
}

Test(registry, malformed_envelope_is_not_ready)
{
    sch_registry_t *r = sch_registry_new(NULL);
    cr_assert_eq(apply(r, resolved("s", 1, 1, "", "{\"Avro\":1}", "sha256:x")), TB_EMALFORMED);
    sch_lookup_t l;
    cr_assert_eq(sch_registry_lookup(r, "s", &l, err, sizeof err), TB_ENOTREADY);
    sch_registry_free(r);
}

Test(registry, malformed_envelope_reports_the_kind_schema_type_names)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("s", 1, 1, "avro", "{\"Avro\":1}", "sha256:x"));
    sch_lookup_t l;
    sch_registry_lookup(r, "s", &l, err, sizeof err);
    cr_assert_eq(l.kind, SCH_AVRO);
    sch_registry_free(r);
}

Test(registry, schema_type_disagreeing_with_envelope_is_not_ready)
{
    sch_registry_t *r = sch_registry_new(NULL);
    cr_assert_eq(apply(r, resolved("s", 1, 1, "json_schema", ENV_V1, "sha256:v1")), TB_EMALFORMED);
    cr_assert(strstr(err, "schema_type \"json_schema\" disagrees with the envelope (Avro)"), "%s",
              err);
    sch_registry_free(r);
}

Test(registry, unknown_subject_is_enoent)
{
    sch_registry_t *r = sch_registry_new(NULL);
    sch_lookup_t l;
    cr_assert_eq(sch_registry_lookup(r, "nope", &l, err, sizeof err), -ENOENT);
    cr_assert_null(l.validator);
    sch_registry_free(r);
}

Test(registry, removed_subject_is_enoent)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("a", 1, 1, "string", "\"String\"", "sha256:s"));
    apply(r, resolved("b", 2, 1, "bytes", "\"Bytes\"", "sha256:b"));
    cr_assert_eq(sch_registry_remove(r, "a"), 0);
    sch_lookup_t l;
    cr_assert_eq(sch_registry_lookup(r, "a", &l, err, sizeof err), -ENOENT);
    sch_validator_t *v = lookup_ok(r, "b", &l);
    sch_validator_unref(v);
    cr_assert_eq(sch_registry_remove(r, "a"), -ENOENT);
    sch_registry_free(r);
}

Test(registry, without_fingerprint_identical_bytes_reuse_the_validator)
{
    sch_registry_t *r = sch_registry_new(NULL);
    const char *env = "{\"Avro\":{\"raw_schema\":\"\\\"int\\\"\"}}";
    apply(r, resolved("s", 1, 1, "avro", env, NULL));
    sch_lookup_t a, b;
    lookup_ok(r, "s", &a);
    apply(r, resolved("s", 1, 1, "avro", env, ""));
    lookup_ok(r, "s", &b);
    cr_assert_eq(a.validator, b.validator);
    sch_validator_unref(a.validator);
    sch_validator_unref(b.validator);
    sch_registry_free(r);
}

Test(registry, without_fingerprint_different_bytes_recompile)
{
    sch_registry_t *r = sch_registry_new(NULL);
    apply(r, resolved("s", 1, 1, "", "{\"Avro\":{\"raw_schema\":\"\\\"int\\\"\"}}", NULL));
    apply(r, resolved("s", 2, 2, "", "{\"Avro\":{\"raw_schema\":\"\\\"string\\\"\"}}", NULL));
    sch_lookup_t l;
    lookup_ok(r, "s", &l);
    cr_assert_eq(h_check_bytes(l.validator, "\x02" "a", 2), 0); /* a string now */
    sch_validator_unref(l.validator);
    sch_registry_free(r);
}

Test(registry, subject_is_required)
{
    sch_registry_t *r = sch_registry_new(NULL);
    cr_assert_eq(apply(r, resolved("", 1, 1, "bytes", "\"Bytes\"", NULL)), -EINVAL);
    sch_registry_free(r);
}

Test(registry, options_reach_the_compiler)
{
    sch_opts_t opts = { .avro_encoding = SCH_AVRO_JSON };
    sch_registry_t *r = sch_registry_new(&opts);
    apply(r, resolved("t", 11, 1, "avro", ENV_V1, "sha256:v1"));
    sch_lookup_t l;
    lookup_ok(r, "t", &l);
    cr_assert_eq(h_check_json(l.validator, "{\"id\": 5}"), 0, "%s", h_err());
    sch_validator_unref(l.validator);
    sch_registry_free(r);
}

Test(registry, schema_type_names_map_to_kinds)
{
    sch_kind_t k;
    cr_assert_eq(sch_kind_from_type("json_schema", &k), 0);
    cr_assert_eq(k, SCH_JSON_SCHEMA);
    cr_assert_eq(sch_kind_from_type("number", &k), 0);
    cr_assert_eq(k, SCH_NUMBER);
    cr_assert_eq(sch_kind_from_type("Avro", &k), -EINVAL);
}
