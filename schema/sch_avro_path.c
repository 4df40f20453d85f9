/*
 * sch_avro_path.c: the "/field/3/key" path in Avro validation errors.
 *
 * The walkers recurse; when a value fails, each level on the way back out
 * prepends its segment (field name, array index, map key). Building the
 * path only on failure keeps valid payloads free of bookkeeping. The buffer
 * is fixed (no allocation on the validation path); a path too long for it
 * keeps its innermost segments and starts with "...".
 */
#include "schema/sch_avro.h"

#include <stdio.h>
#include <string.h>

#define SCH__PATH_ELLIPSIS "..."
#define SCH__PATH_KEY_MAX 48 /* longest map key or name kept in a path */

void sch__av_path_init(sch__av_path_t *p)
{
    p->len = 0;
    p->truncated = false;
    p->buf[sizeof p->buf - 1] = '\0';
}

static void path_prepend(sch__av_path_t *p, const char *s, size_t n)
{
    size_t room = sizeof p->buf - 1 - (sizeof SCH__PATH_ELLIPSIS - 1);
    if (p->truncated || p->len + n > room) {
        p->truncated = true;
        return;
    }
    p->len += n;
    memcpy(p->buf + sizeof p->buf - 1 - p->len, s, n);
}

void sch__av_path_push_name(sch__av_path_t *p, const char *name, size_t n)
{
    char seg[SCH__PATH_KEY_MAX + 4];
    size_t k = n > SCH__PATH_KEY_MAX ? SCH__PATH_KEY_MAX : n;
    seg[0] = '/';
    memcpy(seg + 1, name, k);
    size_t total = 1 + k;
    if (k < n) {
        memcpy(seg + total, "...", 3);
        total += 3;
    }
    path_prepend(p, seg, total);
}

void sch__av_path_push_index(sch__av_path_t *p, uint64_t i)
{
    char seg[24];
    int n = snprintf(seg, sizeof seg, "/%llu", (unsigned long long)i);
    path_prepend(p, seg, (size_t)n);
}

const char *sch__av_path_str(sch__av_path_t *p)
{
    char *start = p->buf + sizeof p->buf - 1 - p->len;
    if (p->truncated) {
        start -= sizeof SCH__PATH_ELLIPSIS - 1;
        memcpy(start, SCH__PATH_ELLIPSIS, sizeof SCH__PATH_ELLIPSIS - 1);
    } else if (p->len == 0) {
        start -= 1;
        start[0] = '/';
    }
    return start;
}
