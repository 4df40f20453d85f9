/*
 * test_json_validate.c: what a device's payload meets when a JSON Schema
 * validates it: the answer, and the message that explains a refusal
 * (schema/sch_json_validate.c, sch_json_check.c).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "unit/schema/helper_json.h"

static const char *telemetry =
    "{\"type\":\"object\",\"required\":[\"name\",\"temperature\"],"
    "\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"temperature\":{\"type\":\"number\",\"maximum\":120},"
    "\"readings\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}},"
    "\"additionalProperties\":false}";

Test(json_validate, valid_payload_passes_with_empty_message)
{
    sch__json_t *s = js_compile(telemetry);
    cr_assert(js_valid(s, "{\"name\":\"t1\",\"temperature\":21.5}"));
    cr_assert_str_empty(js_err());
    sch__json_free(s);
}

Test(json_validate, maximum_message_names_path_value_and_limit)
{
    sch__json_t *s = js_compile(telemetry);
    cr_assert_not(js_valid(s, "{\"name\":\"t1\",\"temperature\":130}"));
    cr_assert_str_eq(js_err(), "/temperature: 130 > maximum 120");
    sch__json_free(s);
}

Test(json_validate, missing_required_property_is_named_in_the_path)
{
    sch__json_t *s = js_compile(telemetry);
    cr_assert_not(js_valid(s, "{\"temperature\":20}"));
    cr_assert_str_eq(js_err(), "/name: required property missing");
    sch__json_free(s);
}

Test(json_validate, root_type_error_says_what_was_expected)
{
    sch__json_t *s = js_compile(telemetry);
    cr_assert_not(js_valid(s, "\"hello\""));
    cr_assert_str_eq(js_err(), "(root): type is string, expected object");
    sch__json_free(s);
}

Test(json_validate, array_items_are_addressed_by_index)
{
    sch__json_t *s = js_compile(telemetry);
    cr_assert_not(js_valid(s, "{\"name\":\"a\",\"temperature\":1,\"readings\":[1,2,2.5]}"));
    cr_assert_str_eq(js_err(), "/readings/2: type is number, expected integer");
    sch__json_free(s);
}

Test(json_validate, additional_property_message_names_the_keyword)
{
    sch__json_t *s = js_compile(telemetry);
    cr_assert_not(js_valid(s, "{\"name\":\"a\",\"temperature\":1,\"extra\":true}"));
    cr_assert_str_eq(js_err(), "/extra: not allowed (additionalProperties is false)");
    sch__json_free(s);
}

Test(json_validate, keys_with_slash_and_tilde_are_escaped_in_the_path)
{
    sch__json_t *s = js_compile("{\"properties\":{\"a/b~c\":{\"type\":\"string\"}}}");
    cr_assert_not(js_valid(s, "{\"a/b~c\":1}"));
    cr_assert_str_eq(js_err(), "/a~1b~0c: type is integer, expected string");
    sch__json_free(s);
}

Test(json_validate, message_is_capped_and_nul_terminated)
{
    sch__json_t *s = js_compile(telemetry);
    char err[8];
    memset(err, 'x', sizeof err);
    const char *p = "{\"name\":\"t1\",\"temperature\":130}";
    cr_assert_eq(sch__json_validate(s, (const uint8_t *)p, strlen(p), err, sizeof err), TB_EINVALID);
    cr_assert_str_eq(err, "/temper");
    sch__json_free(s);
}

Test(json_validate, null_error_buffer_is_accepted)
{
    sch__json_t *s = js_compile(telemetry);
    const char *p = "{\"name\":\"t1\",\"temperature\":130}";
    cr_assert_eq(sch__json_validate(s, (const uint8_t *)p, strlen(p), NULL, 0), TB_EINVALID);
    sch__json_free(s);
}

Test(json_validate, payload_that_is_not_json_is_invalid_with_reason)
{
    sch__json_t *s = js_compile(telemetry);
    cr_assert_not(js_valid(s, "{\"name\":"));
    cr_assert(strncmp(js_err(), "payload is not JSON: ", 21) == 0, "got: %s", js_err());
    sch__json_free(s);
}

Test(json_validate, duplicate_keys_in_payload_are_refused)
{
    /* the validator and a downstream consumer could read different values */
    cr_assert_not(js_check("{\"properties\":{\"a\":{\"maximum\":5}}}", "{\"a\":1,\"a\":9}"));
    cr_assert(strstr(js_err(), "duplicate") != NULL, "got: %s", js_err());
}

Test(json_validate, float_with_zero_fraction_is_an_integer)
{
    cr_assert(js_check("{\"type\":\"integer\"}", "1.0"));
}

Test(json_validate, float_with_fraction_is_not_an_integer)
{
    cr_assert_not(js_check("{\"type\":\"integer\"}", "1.5"));
}

Test(json_validate, integer_beyond_int64_is_still_an_integer)
{
    cr_assert(js_check("{\"type\":\"integer\"}", "123456789012345678901234567890"));
}

Test(json_validate, number_beyond_double_range_is_refused_not_crashed)
{
    cr_assert_not(js_check("{\"type\":\"number\"}", "1e400"));
    cr_assert(strncmp(js_err(), "payload is not JSON: ", 21) == 0, "got: %s", js_err());
}

Test(json_validate, int64_limits_compare_exactly_with_doubles)
{
    /* 2^63 - 1 as an integer is below 2^63 as a double, though (double) of it rounds up to 2^63 */
    cr_assert(js_check("{\"exclusiveMaximum\":9223372036854775808.0}", "9223372036854775807"));
}

Test(json_validate, min_length_counts_code_points_not_bytes)
{
    cr_assert(js_check("{\"maxLength\":2}", "\"\xc3\xa9\xe2\x82\xac\""));
}

Test(json_validate, nul_inside_a_string_is_one_character)
{
    cr_assert(js_check("{\"maxLength\":3,\"minLength\":3}", "\"a\\u0000b\""));
}

Test(json_validate, unique_items_treats_1_and_1_0_as_equal)
{
    cr_assert_not(js_check("{\"uniqueItems\":true}", "[1,1.0]"));
    cr_assert_str_eq(js_err(), "(root): items 0 and 1 are equal (uniqueItems)");
}

Test(json_validate, enum_ignores_object_key_order)
{
    cr_assert(js_check("{\"enum\":[{\"a\":1,\"b\":2}]}", "{\"b\":2,\"a\":1}"));
}

Test(json_validate, const_mismatch_is_reported)
{
    cr_assert_not(js_check("{\"properties\":{\"v\":{\"const\":2}}}", "{\"v\":3}"));
    cr_assert_str_eq(js_err(), "/v: value differs from const");
}

Test(json_validate, multiple_of_decimal_fraction)
{
    cr_assert(js_check("{\"multipleOf\":0.01}", "19.99"));
}

Test(json_validate, pattern_is_not_anchored)
{
    cr_assert(js_check("{\"pattern\":\"b+\"}", "\"abbbc\""));
}

Test(json_validate, pattern_failure_quotes_the_pattern)
{
    cr_assert_not(js_check("{\"pattern\":\"^[a-z]+$\"}", "\"ABC\""));
    cr_assert_str_eq(js_err(), "(root): does not match pattern \"^[a-z]+$\"");
}

Test(json_validate, any_of_failure_is_reported_by_any_of)
{
    cr_assert_not(js_check("{\"anyOf\":[{\"type\":\"string\"},{\"minimum\":3}]}", "1"));
    cr_assert_str_eq(js_err(), "(root): matches none of the 2 schemas in anyOf");
}

Test(json_validate, one_of_with_two_matches_is_invalid)
{
    cr_assert_not(js_check("{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "1"));
    cr_assert_str_eq(js_err(), "(root): matches both schema 0 and schema 1 of oneOf");
}

Test(json_validate, then_branch_error_is_reported_from_inside)
{
    cr_assert_not(js_check("{\"if\":{\"properties\":{\"k\":{\"const\":\"t\"}}},"
                           "\"then\":{\"required\":[\"temp\"]}}",
                           "{\"k\":\"t\"}"));
    cr_assert_str_eq(js_err(), "/temp: required property missing");
}

Test(json_validate, dependent_required_names_the_trigger)
{
    cr_assert_not(js_check("{\"dependentRequired\":{\"unit\":[\"value\"]}}", "{\"unit\":\"C\"}"));
    cr_assert_str_eq(js_err(), "/value: required property missing (dependentRequired by \"unit\")");
}

Test(json_validate, contains_counts_against_min_contains)
{
    cr_assert_not(js_check("{\"contains\":{\"type\":\"string\"},\"minContains\":2}", "[\"a\",1,2]"));
    cr_assert_str_eq(js_err(), "(root): 1 items match contains < minContains 2");
}

Test(json_validate, property_names_failure_names_the_key)
{
    cr_assert_not(js_check("{\"propertyNames\":{\"maxLength\":3}}", "{\"abcd\":1}"));
    cr_assert_str_eq(js_err(), "/abcd: property name not allowed by propertyNames");
}

Test(json_validate, unevaluated_properties_sees_through_all_of_and_ref)
{
    const char *schema = "{\"$defs\":{\"b\":{\"properties\":{\"b\":true}}},"
                         "\"allOf\":[{\"properties\":{\"a\":true}},{\"$ref\":\"#/$defs/b\"}],"
                         "\"unevaluatedProperties\":false}";
    cr_assert(js_check(schema, "{\"a\":1,\"b\":2}"));
    cr_assert_not(js_check(schema, "{\"a\":1,\"c\":3}"));
    cr_assert_str_eq(js_err(), "/c: not allowed (unevaluatedProperties is false)");
}

Test(json_validate, unevaluated_properties_ignores_failed_any_of_branches)
{
    const char *schema = "{\"anyOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]},"
                         "{\"properties\":{\"b\":true},\"required\":[\"b\"]}],"
                         "\"unevaluatedProperties\":false}";
    /* "a" is an integer, so the first branch fails and evaluates nothing */
    cr_assert_not(js_check(schema, "{\"a\":1,\"b\":2}"));
}

Test(json_validate, unevaluated_items_after_prefix_items)
{
    const char *schema = "{\"prefixItems\":[{\"type\":\"string\"}],\"unevaluatedItems\":false}";
    cr_assert(js_check(schema, "[\"a\"]"));
    cr_assert_not(js_check(schema, "[\"a\",2]"));
    cr_assert_str_eq(js_err(), "/1: not allowed (unevaluatedItems is false)");
}

Test(json_validate, dynamic_ref_follows_the_dynamic_scope)
{
    /* a generic list whose items the outer schema narrows to strings */
    const char *schema =
        "{\"$id\":\"https://example.com/strings\",\"$ref\":\"list\","
        "\"$defs\":{\"items\":{\"$dynamicAnchor\":\"item\",\"type\":\"string\"},"
        "\"list\":{\"$id\":\"list\",\"type\":\"array\",\"items\":{\"$dynamicRef\":\"#item\"},"
        "\"$defs\":{\"any\":{\"$dynamicAnchor\":\"item\"}}}}}";
    cr_assert(js_check(schema, "[\"a\",\"b\"]"));
    cr_assert_not(js_check(schema, "[\"a\",1]"));
    cr_assert_str_eq(js_err(), "/1: type is integer, expected string");
}

Test(json_validate, format_is_an_annotation_by_default)
{
    cr_assert(js_check("{\"format\":\"ipv4\"}", "\"999.1.1.1\""));
}

Test(json_validate, format_is_asserted_when_asked)
{
    sch_opts_t o = { .format_assert = true };
    sch__json_t *s = js_compile_opts("{\"properties\":{\"ip\":{\"format\":\"ipv4\"}}}", &o);
    cr_assert(js_valid(s, "{\"ip\":\"10.0.0.1\"}"));
    cr_assert_not(js_valid(s, "{\"ip\":\"999.1.1.1\"}"));
    cr_assert_str_eq(js_err(), "/ip: not a valid ipv4 (format)");
    sch__json_free(s);
}

Test(json_validate, validate_value_takes_a_parsed_instance)
{
    sch__json_t *s = js_compile(telemetry);
    json_t *x = json_pack("{s:s, s:i}", "name", "n", "temperature", 200);
    char err[128];
    cr_assert_eq(sch__json_validate_value(s, x, err, sizeof err), TB_EINVALID);
    cr_assert_str_eq(err, "/temperature: 200 > maximum 120");
    json_decref(x);
    sch__json_free(s);
}

Test(json_validate, boolean_schemas_accept_everything_or_nothing)
{
    cr_assert(js_check("true", "{\"any\":[1]}"));
    cr_assert_not(js_check("false", "null"));
    cr_assert_str_eq(js_err(), "(root): not allowed (the schema is false)");
}

Test(json_validate, capped_message_does_not_split_a_utf8_character)
{
    sch__json_t *s = js_compile("{\"properties\":{\"\xc3\xa9t\xc3\xa9\":{\"type\":\"string\"}}}");
    const char *p = "{\"\xc3\xa9t\xc3\xa9\":1}";
    char err[6]; /* "/" + "é" + "t" + half of "é" would not fit whole */
    cr_assert_eq(sch__json_validate(s, (const uint8_t *)p, strlen(p), err, sizeof err), TB_EINVALID);
    cr_assert_str_eq(err, "/\xc3\xa9t");
    sch__json_free(s);
}
