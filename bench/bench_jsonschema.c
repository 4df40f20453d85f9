/* bench-lib: tb_schema */
/*
 * bench_jsonschema.c: JSON Schema validation throughput on telemetry.
 *
 *   build/bench/bench_jsonschema <schema.json> <payload.json> [seconds]
 *
 * Compiles the schema once, then validates the same ~200-byte payload in a
 * loop for `seconds` (default 2), the way the gateway does per message:
 * parse with jansson, then walk the compiled schema. Prints messages/s and
 * MB/s for that, and, to show where the time goes, for parsing alone and
 * for validating an already parsed payload. bench_jsonschema.sh runs this
 * beside Python's jsonschema on the same schema and payload. A figure, not
 * a pass/fail: nothing here asserts a speed.
 *
 * Rates are per second of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
 * not wall time: the build machines are shared, and CPU time keeps the
 * figure from swinging with the neighbours' load. The Python peer does the
 * same with time.process_time().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "schema/sch_json.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = tb_malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef enum { FULL, PARSE_ONLY, VALIDATE_ONLY } bench_mode_t;

/* Runs one mode for about `secs` CPU seconds; returns messages per CPU second. */
static double run(bench_mode_t mode, const sch__json_t *s, const char *payload, size_t len, const json_t *parsed,
                  double secs)
{
    uint64_t start = cpu_ns(), deadline = start + (uint64_t)(secs * 1e9), now = start;
    uint64_t n = 0;
    char err[256];
    int bad = 0;
    while (now < deadline) {
        for (int k = 0; k < 1024; k++) {
            if (mode == FULL) {
                bad |= sch__json_validate(s, (const uint8_t *)payload, len, err, sizeof err);
            } else if (mode == PARSE_ONLY) {
                json_error_t jerr;
                json_t *x = sch__json_parse(payload, len, &jerr);
                bad |= x == NULL;
                json_decref(x);
            } else {
                bad |= sch__json_validate_value(s, parsed, err, sizeof err);
            }
        }
        n += 1024;
        now = cpu_ns();
    }
    if (bad) {
        fprintf(stderr, "the payload did not validate during the run\n");
        exit(1);
    }
    return (double)n / ((double)(now - start) / 1e9);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <schema.json> <payload.json> [seconds]\n", argv[0]);
        return 2;
    }
    double secs = argc > 3 ? atof(argv[3]) : 2.0;
    size_t slen, plen;
    char *schema = slurp(argv[1], &slen), *payload = slurp(argv[2], &plen);
    while (plen && (payload[plen - 1] == '\n' || payload[plen - 1] == '\r')) plen--;
    char err[256];
    sch__json_t *s;
    if (sch__json_compile(schema, slen, NULL, &s, err, sizeof err)) {
        fprintf(stderr, "schema: %s\n", err);
        return 1;
    }
    if (sch__json_validate(s, (const uint8_t *)payload, plen, err, sizeof err)) {
        fprintf(stderr, "payload does not validate: %s\n", err);
        return 1;
    }
    json_error_t jerr;
    json_t *parsed = sch__json_parse(payload, plen, &jerr);
    run(FULL, s, payload, plen, parsed, 0.2); /* warm up */
    double full = run(FULL, s, payload, plen, parsed, secs);
    double parse = run(PARSE_ONLY, s, payload, plen, parsed, secs / 2);
    double val = run(VALIDATE_ONLY, s, payload, plen, parsed, secs / 2);
    printf("payload %zu bytes, schema %zu bytes; rates per CPU second\n", plen, slen);
    printf("%-34s %12.0f msg/s %8.1f MB/s %8.2f us/msg\n", "C (tributary, parse+validate)", full,
           full * (double)plen / 1e6, 1e6 / full);
    printf("%-34s %12.0f msg/s %8.1f MB/s %8.2f us/msg\n", "C   parse only (jansson)", parse,
           parse * (double)plen / 1e6, 1e6 / parse);
    printf("%-34s %12.0f msg/s %8.1f MB/s %8.2f us/msg\n", "C   validate only (parsed)", val,
           val * (double)plen / 1e6, 1e6 / val);
    json_decref(parsed);
    sch__json_free(s);
    free(schema);
    free(payload);
    return 0;
}
