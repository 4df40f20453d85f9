/*
 * helper_spb.c: see helper_spb.h.
 */
#include "helper_spb.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/sparkplug_b.pb-c.h"

static void cat(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cat(char *out, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(out);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

static void hex(char *out, size_t cap, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cat(out, cap, "%02x", p[i]);
}

const char *spb_dump_c(const uint8_t *p, size_t len)
{
    static char out[65536];
    out[0] = '\0';
    Spb__Payload *pl = spb__payload__unpack(NULL, len, p);
    if (!pl) {
        snprintf(out, sizeof out, "ERROR protobuf-c does not decode it");
        return out;
    }
    if (pl->has_timestamp)
        cat(out, sizeof out, "ts=%llu", (unsigned long long)pl->timestamp);
    else
        cat(out, sizeof out, "ts=-");
    if (pl->has_seq)
        cat(out, sizeof out, " seq=%llu", (unsigned long long)pl->seq);
    for (size_t i = 0; i < pl->n_metrics; i++) {
        const Spb__Payload__Metric *m = pl->metrics[i];
        cat(out, sizeof out, "|%s,", m->name ? m->name : "-");
        if (m->has_alias) cat(out, sizeof out, "%llu,", (unsigned long long)m->alias); else cat(out, sizeof out, "-,");
        if (m->has_timestamp) cat(out, sizeof out, "%llu,", (unsigned long long)m->timestamp); else cat(out, sizeof out, "-,");
        if (m->has_datatype) cat(out, sizeof out, "%u,", m->datatype); else cat(out, sizeof out, "-,");
        if (m->has_is_historical) cat(out, sizeof out, "%d,", m->is_historical ? 1 : 0); else cat(out, sizeof out, "-,");
        if (m->has_is_null) cat(out, sizeof out, "%d,", m->is_null ? 1 : 0); else cat(out, sizeof out, "-,");
        switch (m->value_case) {
        case SPB__PAYLOAD__METRIC__VALUE_INT_VALUE: cat(out, sizeof out, "i:%u", m->int_value); break;
        case SPB__PAYLOAD__METRIC__VALUE_LONG_VALUE: cat(out, sizeof out, "l:%llu", (unsigned long long)m->long_value); break;
        case SPB__PAYLOAD__METRIC__VALUE_FLOAT_VALUE: cat(out, sizeof out, "f:%.9g", (double)m->float_value); break;
        case SPB__PAYLOAD__METRIC__VALUE_DOUBLE_VALUE: cat(out, sizeof out, "d:%.17g", m->double_value); break;
        case SPB__PAYLOAD__METRIC__VALUE_BOOLEAN_VALUE: cat(out, sizeof out, "b:%d", m->boolean_value ? 1 : 0); break;
        case SPB__PAYLOAD__METRIC__VALUE_STRING_VALUE:
            cat(out, sizeof out, "s:");
            hex(out, sizeof out, (const uint8_t *)m->string_value, strlen(m->string_value));
            break;
        case SPB__PAYLOAD__METRIC__VALUE_BYTES_VALUE:
            cat(out, sizeof out, "x:");
            hex(out, sizeof out, m->bytes_value.data, m->bytes_value.len);
            break;
        case SPB__PAYLOAD__METRIC__VALUE__NOT_SET: cat(out, sizeof out, "-"); break;
        default: cat(out, sizeof out, "other"); break;
        }
    }
    spb__payload__free_unpacked(pl, NULL);
    return out;
}

void spb_dump_py(const uint8_t *const *p, const size_t *len, size_t n, char **out)
{
    cr_assert(n <= 16);
    const char *src = getenv("TRIB_SOURCE_DIR"), *bld = getenv("TRIB_BUILD_DIR");
    cr_assert(src && bld, "TRIB_SOURCE_DIR and TRIB_BUILD_DIR must be set (ctest sets them)");
    char dir[] = "/tmp/spb_py_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/unit/replicator/spb_decode.py", src);
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%zu.bin", dir, i);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(p[i], 1, len[i], f), len[i]);
        fclose(f);
        cat(cmd, sizeof cmd, " %s", path);
    }
    FILE *pp = popen(cmd, "r");
    cr_assert_not_null(pp, "cannot run %s", cmd);
    char *line = NULL;
    size_t cap = 0;
    size_t got = 0;
    while (got < n && getline(&line, &cap, pp) > 0) {
        line[strcspn(line, "\n")] = '\0';
        out[got++] = strdup(line);
    }
    free(line);
    int status = pclose(pp);
    cr_assert_eq(got, n, "spb_decode.py printed %zu lines for %zu payloads (status %d)", got, n, status);
    cr_assert_eq(status, 0, "spb_decode.py failed (status %d)", status);
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%zu.bin", dir, i);
        unlink(path);
    }
    rmdir(dir);
}

void spb_expect(const uint8_t *p, size_t len, const char *want)
{
    const char *c = spb_dump_c(p, len);
    cr_assert_str_eq(c, want, "protobuf-c reads\n  %s\nnot\n  %s", c, want);
    char *py;
    spb_dump_py(&p, &len, 1, &py);
    cr_assert_str_eq(py, want, "Python protobuf reads\n  %s\nnot\n  %s", py, want);
    free(py);
}
