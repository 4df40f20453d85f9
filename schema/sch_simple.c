/*
 * sch_simple.c: the kinds that carry no schema text: Bytes, String, Number.
 *
 * These mirror Danube's own built-in types: Bytes accepts anything, String
 * is a UTF-8 check (strict: no overlongs, no surrogates, nothing past
 * U+10FFFF, via tb_utf8_valid), Number is a 4- or 8-byte payload (an IEEE
 * float/double or a 32/64-bit integer; the byte order is the producer's
 * business, so only the size can be checked). They need no compiled state,
 * so the dispatch calls straight in here.
 */
#include "schema/sch_internal.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/base.h"

void sch__errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int sch__simple_validate(sch_kind_t kind, const uint8_t *payload, size_t len, char *err,
                         size_t errlen)
{
    switch (kind) {
    case SCH_BYTES:
        return 0;
    case SCH_STRING:
        if (len > 0 && !tb_utf8_valid(payload, len)) {
            sch__errf(err, errlen, "String payload is not valid UTF-8");
            return TB_EINVALID;
        }
        return 0;
    case SCH_NUMBER:
        if (len != 4 && len != 8) {
            sch__errf(err, errlen, "Number payload must be 4 or 8 bytes, got %zu", len);
            return TB_EINVALID;
        }
        return 0;
    default:
        sch__errf(err, errlen, "%s is not a simple kind", sch_kind_name(kind));
        return TB_EINVALID;
    }
}
