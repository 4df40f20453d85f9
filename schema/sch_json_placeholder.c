/*
 * sch_json_placeholder.c: TEMPORARY stand-in for the JSON Schema validator.
 *
 * The real validator (schema/sch_json*.c) is written on another branch. This
 * file exists only so that the avro branch builds and its dispatch can be
 * tested on its own; it is deleted when the branches merge. It fails closed:
 * every compile is refused, so no topic with a JSON Schema becomes ready.
 */
#include "schema/sch_json.h"

#include <stdlib.h>

#include "base/base.h"
#include "schema/sch_internal.h"

struct sch__json {
    int unused;
};

int sch__json_compile(const char *text, size_t len, const sch_opts_t *opts, sch__json_t **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    sch__errf(err, errlen, "JSON Schema validator not built");
    return TB_EUNSUPPORTED;
}

int sch__json_validate(const sch__json_t *s, const uint8_t *payload, size_t len, char *err,
                       size_t errlen)
{
    sch__errf(err, errlen, "JSON Schema validator not built");
    return TB_EUNSUPPORTED;
}

void sch__json_free(sch__json_t *s)
{
    free(s); /* never allocated by the placeholder; free(NULL) is a no-op */
}
