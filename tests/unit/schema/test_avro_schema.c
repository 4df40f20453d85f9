/*
 * test_avro_schema.c: compiling Avro schemas: what avro-c refuses, what we
 * refuse on top (bad defaults, types with no finite value), and defaults.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"
#include "unit/schema/helper_avro.h"

static char err[512];

#define REC(fields) "{\"type\":\"record\",\"name\":\"R\",\"fields\":[" fields "]}"

Test(avro_schema, empty_text_is_refused)
{
    sch_validator_t *v = NULL;
    cr_assert_eq(sch_compile(SCH_AVRO, "", 0, NULL, &v, err, sizeof err), TB_ESCHEMA);
    cr_assert_null(v);
}

Test(avro_schema, text_that_is_not_json_is_refused)
{
    cr_assert_eq(h_avro_rc("{\"type\": ", err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "not JSON"), "%s", err);
}

Test(avro_schema, unknown_type_is_refused_with_avro_c_reason)
{
    cr_assert_eq(h_avro_rc("\"integer\"", err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "rejected by avro-c"), "%s", err);
}

Test(avro_schema, record_without_fields_is_refused)
{
    cr_assert_eq(h_avro_rc("{\"type\":\"record\",\"name\":\"R\"}", err, sizeof err), TB_ESCHEMA);
}

Test(avro_schema, reference_to_undefined_name_is_refused)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"a\",\"type\":\"Missing\"}"), err, sizeof err),
                 TB_ESCHEMA);
}

Test(avro_schema, record_that_always_contains_itself_is_refused)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"me\",\"type\":\"R\"}"), err, sizeof err), TB_ESCHEMA);
    cr_assert(strstr(err, "no finite value"), "%s", err);
}

Test(avro_schema, record_with_itself_behind_a_union_compiles)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"me\",\"type\":[\"null\",\"R\"]}"), err, sizeof err), 0,
                 "%s", err);
}

Test(avro_schema, defaults_matching_their_types_compile)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"i\",\"type\":\"int\",\"default\":3},"
                               "{\"name\":\"s\",\"type\":\"string\",\"default\":\"x\"},"
                               "{\"name\":\"b\",\"type\":\"bytes\",\"default\":\"\\u00ff\"},"
                               "{\"name\":\"o\",\"type\":[\"null\",\"int\"],\"default\":null},"
                               "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"long\"},"
                               "\"default\":[1,2]},"
                               "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\","
                               "\"symbols\":[\"X\",\"Y\"]},\"default\":\"Y\"}"),
                           err, sizeof err),
                 0, "%s", err);
}

Test(avro_schema, default_of_the_wrong_type_is_refused)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"i\",\"type\":\"int\",\"default\":\"three\"}"), err,
                           sizeof err),
                 TB_ESCHEMA);
    cr_assert(strstr(err, "default of field R.i does not match its type"), "%s", err);
}

Test(avro_schema, union_default_must_match_the_first_branch)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"o\",\"type\":[\"null\",\"int\"],\"default\":5}"), err,
                           sizeof err),
                 TB_ESCHEMA);
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"o\",\"type\":[\"int\",\"null\"],\"default\":5}"), err,
                           sizeof err),
                 0, "%s", err);
}

Test(avro_schema, int_default_out_of_range_is_refused)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"i\",\"type\":\"int\",\"default\":4294967296}"), err,
                           sizeof err),
                 TB_ESCHEMA);
}

Test(avro_schema, record_default_with_nested_defaults_compiles)
{
    cr_assert_eq(h_avro_rc(REC("{\"name\":\"p\",\"type\":{\"type\":\"record\",\"name\":\"P\","
                               "\"fields\":[{\"name\":\"x\",\"type\":\"int\"},"
                               "{\"name\":\"y\",\"type\":\"int\",\"default\":0}]},"
                               "\"default\":{\"x\":1}}"),
                           err, sizeof err),
                 0, "%s", err);
}

Test(avro_schema, binary_datum_always_carries_fields_that_have_defaults)
{
    /* Defaults are for readers resolving an older writer's data; a datum
     * still has every field, so leaving one out is a truncated payload. */
    sch_validator_t *v = h_avro(REC("{\"name\":\"a\",\"type\":\"int\"},"
                                    "{\"name\":\"b\",\"type\":\"int\",\"default\":7}"));
    cr_assert_eq(h_check_bytes(v, "\x02", 1), TB_EINVALID);
    cr_assert_eq(h_check_bytes(v, "\x02\x04", 2), 0);
    sch_validator_unref(v);
}

Test(avro_schema, fixed_of_size_zero_compiles_and_takes_no_bytes)
{
    sch_validator_t *v = h_avro("{\"type\":\"fixed\",\"name\":\"Z\",\"size\":0}");
    cr_assert_eq(h_check_bytes(v, "", 0), 0);
    sch_validator_unref(v);
}

Test(avro_schema, enum_without_symbols_is_refused)
{
    cr_assert_eq(h_avro_rc("{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[]}", err, sizeof err),
                 TB_ESCHEMA);
}
