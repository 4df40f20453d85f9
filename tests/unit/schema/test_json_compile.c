/*
 * test_json_compile.c: what the registry's schema text meets at compile
 * time: dialect choice, $ref resolution and the errors that name the place
 * (schema/sch_json_compile.c, sch_json_keywords.c, sch_json_ref.c).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "unit/schema/helper_json.h"

Test(json_compile, dialect_defaults_to_2020_12)
{
    /* prefixItems exists only in 2020-12 */
    cr_assert_not(js_check("{\"prefixItems\":[{\"type\":\"string\"}]}", "[1]"));
}

Test(json_compile, draft7_is_chosen_by_schema_keyword)
{
    /* draft 7: an array "items" checks by position */
    cr_assert_not(js_check("{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
                           "\"items\":[{\"type\":\"string\"}]}",
                           "[1]"));
}

Test(json_compile, draft7_ref_overrides_sibling_keywords)
{
    const char *schema = "{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
                         "\"definitions\":{\"s\":{\"type\":\"string\"}},"
                         "\"properties\":{\"a\":{\"$ref\":\"#/definitions/s\",\"maxLength\":1}}}";
    cr_assert(js_check(schema, "{\"a\":\"long\"}"));
}

Test(json_compile, in_2020_12_ref_applies_beside_siblings)
{
    const char *schema = "{\"$defs\":{\"s\":{\"type\":\"string\"}},"
                         "\"properties\":{\"a\":{\"$ref\":\"#/$defs/s\",\"maxLength\":1}}}";
    cr_assert_not(js_check(schema, "{\"a\":\"long\"}"));
}

Test(json_compile, unknown_schema_dialect_is_unsupported)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\"$schema\":\"http://json-schema.org/draft-04/schema#\"}", NULL, err, sizeof err),
                 TB_EUNSUPPORTED);
    cr_assert(strstr(err, "draft-04") != NULL, "got: %s", err);
}

Test(json_compile, malformed_keyword_value_names_the_place)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\"properties\":{\"a\":{\"minLength\":-1}}}", NULL, err, sizeof err), TB_ESCHEMA);
    cr_assert_str_eq(err, "#/properties/a: minLength must be a non-negative integer");
}

Test(json_compile, integral_double_is_accepted_as_a_count)
{
    cr_assert_not(js_check("{\"maxItems\":2.0}", "[1,2,3]"));
}

Test(json_compile, unknown_type_name_is_an_error)
{
    cr_assert_eq(js_compile_rc("{\"type\":\"int\"}", NULL, NULL, 0), TB_ESCHEMA);
}

Test(json_compile, schema_text_that_is_not_json_gives_the_line)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\n\"type\": }", NULL, err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "line 2") != NULL, "got: %s", err);
}

Test(json_compile, schema_must_be_object_or_boolean)
{
    cr_assert_eq(js_compile_rc("[1]", NULL, NULL, 0), TB_ESCHEMA);
}

Test(json_compile, duplicate_keys_in_schema_are_refused)
{
    cr_assert_eq(js_compile_rc("{\"maximum\":1,\"maximum\":5}", NULL, NULL, 0), TB_ESCHEMA);
}

Test(json_compile, invalid_regex_is_a_schema_error)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\"pattern\":\"(ab\"}", NULL, err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "pattern") != NULL, "got: %s", err);
}

Test(json_compile, backreference_is_unsupported_not_ignored)
{
    cr_assert_eq(js_compile_rc("{\"pattern\":\"(a)\\\\1\"}", NULL, NULL, 0), TB_EUNSUPPORTED);
}

Test(json_compile, local_ref_to_missing_definition_is_an_error)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\"$ref\":\"#/$defs/nope\"}", NULL, err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "#/$defs/nope") != NULL, "got: %s", err);
}

Test(json_compile, remote_ref_without_resolver_says_so)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\"$ref\":\"https://reg.example/s.json\"}", NULL, err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "no resolver") != NULL, "got: %s", err);
}

Test(json_compile, remote_ref_resolves_through_opts_resolve)
{
    static const char *const table[] = { "https://reg.example/temp.json", "{\"type\":\"number\",\"maximum\":50}",
                                         NULL };
    sch_opts_t o = { .resolve = js_table_resolve, .resolve_arg = (void *)table };
    sch__json_t *s = js_compile_opts("{\"properties\":{\"t\":{\"$ref\":\"https://reg.example/temp.json\"}}}", &o);
    cr_assert(js_valid(s, "{\"t\":20}"));
    cr_assert_not(js_valid(s, "{\"t\":80}"));
    sch__json_free(s);
}

Test(json_compile, relative_ref_resolves_against_id)
{
    static const char *const table[] = { "https://reg.example/defs/unit.json", "{\"enum\":[\"C\",\"F\"]}", NULL };
    sch_opts_t o = { .resolve = js_table_resolve, .resolve_arg = (void *)table };
    sch__json_t *s = js_compile_opts("{\"$id\":\"https://reg.example/sensors/t.json\","
                                     "\"properties\":{\"u\":{\"$ref\":\"../defs/unit.json\"}}}",
                                     &o);
    cr_assert_not(js_valid(s, "{\"u\":\"K\"}"));
    sch__json_free(s);
}

Test(json_compile, standard_metaschema_ref_needs_no_resolver)
{
    const char *schema = "{\"$ref\":\"https://json-schema.org/draft/2020-12/schema\"}";
    cr_assert(js_check(schema, "{\"type\":\"string\"}"));
    cr_assert_not(js_check(schema, "{\"type\":12}"));
}

Test(json_compile, custom_metaschema_with_unknown_required_vocabulary_is_unsupported)
{
    static const char *const table[] = {
        "https://reg.example/meta.json",
        "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
        "\"$vocabulary\":{\"https://json-schema.org/draft/2020-12/vocab/core\":true,"
        "\"https://reg.example/vocab/units\":true}}",
        NULL
    };
    sch_opts_t o = { .resolve = js_table_resolve, .resolve_arg = (void *)table };
    cr_assert_eq(js_compile_rc("{\"$schema\":\"https://reg.example/meta.json\"}", &o, NULL, 0), TB_EUNSUPPORTED);
}

Test(json_compile, anchor_ref_finds_the_anchored_schema)
{
    const char *schema = "{\"$defs\":{\"x\":{\"$anchor\":\"pos\",\"minimum\":0}},\"$ref\":\"#pos\"}";
    cr_assert_not(js_check(schema, "-1"));
}

Test(json_compile, pointer_ref_is_percent_and_tilde_decoded)
{
    const char *schema = "{\"$defs\":{\"a/b%c\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a~1b%25c\"}";
    cr_assert_not(js_check(schema, "1"));
}

Test(json_compile, id_inside_enum_is_not_an_identifier)
{
    char err[256];
    cr_assert_eq(js_compile_rc("{\"enum\":[{\"$id\":\"https://x.example/e\"}],"
                               "\"$ref\":\"https://x.example/e\"}",
                               NULL, err, sizeof err),
                 TB_ESCHEMA);
}
