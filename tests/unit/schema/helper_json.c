/*
 * helper_json.c: the JSON Schema unit tests' shorthands (helper_json.h).
 */
#include "unit/schema/helper_json.h"

#include <criterion/criterion.h>
#include <string.h>

static char last_err[512];

sch__json_t *js_compile_opts(const char *schema, const sch_opts_t *opts)
{
    char err[512];
    sch__json_t *s = NULL;
    int rc = sch__json_compile(schema, strlen(schema), opts, &s, err, sizeof err);
    cr_assert_eq(rc, 0, "schema %s does not compile: %s", schema, err);
    return s;
}

sch__json_t *js_compile(const char *schema)
{
    return js_compile_opts(schema, NULL);
}

int js_compile_rc(const char *schema, const sch_opts_t *opts, char *err, size_t errlen)
{
    sch__json_t *s = (sch__json_t *)0x1;
    int rc = sch__json_compile(schema, strlen(schema), opts, &s, err, errlen);
    if (rc) cr_assert_null(s, "a failed compile leaves *out NULL");
    sch__json_free(s);
    return rc;
}

bool js_valid(const sch__json_t *s, const char *payload)
{
    last_err[0] = '\0';
    int rc = sch__json_validate(s, (const uint8_t *)payload, strlen(payload), last_err, sizeof last_err);
    cr_assert(rc == 0 || rc == TB_EINVALID, "unexpected rc %d", rc);
    return rc == 0;
}

const char *js_err(void)
{
    return last_err;
}

bool js_check(const char *schema, const char *payload)
{
    sch__json_t *s = js_compile(schema);
    bool ok = js_valid(s, payload);
    sch__json_free(s);
    return ok;
}

const char *js_table_resolve(void *arg, const char *uri, size_t *len)
{
    const char *const *t = arg;
    for (; t[0]; t += 2) {
        if (strcmp(t[0], uri) == 0) {
            *len = strlen(t[1]);
            return t[1];
        }
    }
    return NULL;
}
