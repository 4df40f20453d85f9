/*
 * test_envelope.c: Danube's schema envelope (ResolvedSchema.schema_definition):
 * each variant parses to its kind and text, anything else is refused with a
 * message that names the problem and leaves the outputs NULL.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"
#include "schema/schema.h"

typedef struct parsed {
    int rc;
    sch_kind_t kind;
    char *raw, *fp;
    char err[256];
} parsed_t;

static parsed_t parse(const char *def)
{
    parsed_t p = { .kind = (sch_kind_t)-1 };
    p.rc = sch_envelope_parse((const uint8_t *)def, strlen(def), &p.kind, &p.raw, &p.fp, p.err,
                              sizeof p.err);
    return p;
}

static void done(parsed_t *p)
{
    free(p->raw);
    free(p->fp);
}

/* Refused: TB_EMALFORMED, outputs NULL, and err contains `needle`. */
static void assert_refused(const char *def, const char *needle)
{
    parsed_t p = parse(def);
    cr_assert_eq(p.rc, TB_EMALFORMED, "accepted: %s", def);
    cr_assert_null(p.raw);
    cr_assert_null(p.fp);
    cr_assert(strstr(p.err, needle), "error \"%s\" lacks \"%s\"", p.err, needle);
}

Test(envelope, bare_bytes_string_number_parse_to_their_kinds)
{
    const char *defs[] = { "\"Bytes\"", "\"String\"", "\"Number\"" };
    sch_kind_t kinds[] = { SCH_BYTES, SCH_STRING, SCH_NUMBER };
    for (size_t i = 0; i < 3; i++) {
        parsed_t p = parse(defs[i]);
        cr_assert_eq(p.rc, 0, "%s: %s", defs[i], p.err);
        cr_assert_eq(p.kind, kinds[i]);
        cr_assert_null(p.raw);
        cr_assert_null(p.fp);
    }
}

Test(envelope, avro_gives_raw_schema_and_fingerprint)
{
    parsed_t p = parse("{\"Avro\": {\"raw_schema\": \"{\\\"type\\\":\\\"int\\\"}\", "
                       "\"fingerprint\": \"sha256:abc\"}}");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.kind, SCH_AVRO);
    cr_assert_str_eq(p.raw, "{\"type\":\"int\"}");
    cr_assert_str_eq(p.fp, "sha256:abc");
    done(&p);
}

Test(envelope, json_schema_gives_raw_schema)
{
    parsed_t p = parse("{\"JsonSchema\": {\"raw_schema\": \"{}\", \"fingerprint\": \"sha256:1\"}}");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.kind, SCH_JSON_SCHEMA);
    cr_assert_str_eq(p.raw, "{}");
    done(&p);
}

Test(envelope, protobuf_parses_so_that_compile_can_refuse_it)
{
    parsed_t p = parse("{\"Protobuf\": {\"raw_proto\": \"syntax = \\\"proto3\\\";\", "
                       "\"message_name\": \"M\", \"fingerprint\": \"sha256:2\"}}");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.kind, SCH_PROTOBUF);
    cr_assert_str_eq(p.raw, "syntax = \"proto3\";");
    done(&p);
}

Test(envelope, fingerprint_is_optional)
{
    parsed_t p = parse("{\"Avro\": {\"raw_schema\": \"\\\"long\\\"\"}}");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_null(p.fp);
    done(&p);
}

Test(envelope, empty_input_is_refused)
{
    sch_kind_t k;
    char *raw = (char *)1, *fp = (char *)1, err[128] = "";
    cr_assert_eq(sch_envelope_parse(NULL, 0, &k, &raw, &fp, err, sizeof err), TB_EMALFORMED);
    cr_assert_null(raw);
    cr_assert_null(fp);
    cr_assert(strstr(err, "empty"), "%s", err);
}

Test(envelope, non_json_is_refused)
{
    assert_refused("Avro: int", "not JSON");
}

Test(envelope, trailing_bytes_are_refused)
{
    assert_refused("\"Bytes\" \"String\"", "not JSON");
}

Test(envelope, unknown_bare_string_is_refused)
{
    assert_refused("\"Json\"", "unknown schema type \"Json\"");
}

Test(envelope, bare_names_are_case_sensitive)
{
    assert_refused("\"bytes\"", "unknown schema type");
}

Test(envelope, unknown_tag_is_refused)
{
    assert_refused("{\"Thrift\": {\"raw_schema\": \"x\"}}", "unknown tag \"Thrift\"");
}

Test(envelope, two_tags_are_refused)
{
    assert_refused("{\"Avro\": {\"raw_schema\": \"x\"}, \"JsonSchema\": {\"raw_schema\": \"y\"}}",
                   "exactly one tag");
}

Test(envelope, empty_object_is_refused)
{
    assert_refused("{}", "exactly one tag");
}

Test(envelope, tag_body_must_be_an_object)
{
    assert_refused("{\"Avro\": \"\\\"int\\\"\"}", "must hold an object");
}

Test(envelope, missing_raw_schema_is_refused)
{
    assert_refused("{\"Avro\": {\"fingerprint\": \"sha256:1\"}}", "needs a non-empty \"raw_schema\"");
}

Test(envelope, empty_raw_schema_is_refused)
{
    assert_refused("{\"JsonSchema\": {\"raw_schema\": \"\"}}", "non-empty");
}

Test(envelope, raw_schema_must_be_a_string)
{
    assert_refused("{\"Avro\": {\"raw_schema\": {\"type\": \"int\"}}}", "\"Avro.raw_schema\" must be a string");
}

Test(envelope, fingerprint_must_be_a_string)
{
    assert_refused("{\"Avro\": {\"raw_schema\": \"x\", \"fingerprint\": 7}}", "must be a string");
}

Test(envelope, unknown_member_is_refused)
{
    assert_refused("{\"Avro\": {\"raw_schema\": \"x\", \"raw_proto\": \"y\"}}",
                   "unknown member \"raw_proto\"");
}

Test(envelope, protobuf_needs_message_name)
{
    assert_refused("{\"Protobuf\": {\"raw_proto\": \"syntax = \\\"proto3\\\";\"}}", "message_name");
}

Test(envelope, duplicate_keys_are_refused)
{
    assert_refused("{\"Avro\": {\"raw_schema\": \"x\", \"raw_schema\": \"y\"}}", "not JSON");
}

Test(envelope, array_is_refused)
{
    assert_refused("[\"Avro\"]", "string or an object");
}

Test(envelope, nul_inside_schema_text_is_refused)
{
    assert_refused("{\"Avro\": {\"raw_schema\": \"a\\u0000b\"}}", "not JSON");
}
