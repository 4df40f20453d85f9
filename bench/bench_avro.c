/* bench-lib: tb_schema */
/*
 * bench_avro.c: Avro validation throughput for a 10-field telemetry record,
 * our walker against avro-c's own reader on the same bytes (the comparison
 * behind the choice in schema/sch_avro.h), plus the JSON encoding.
 *
 *   build/bench/bench_avro [seconds per figure, default 2]
 *   build/bench/bench_avro --avro-c-hostile
 *
 * Prints validations/s and MB/s of payload. Figures, not a test: it never
 * fails on time. --avro-c-hostile instead feeds three hostile payloads to
 * avro-c's reader and to the walker and prints time, result and peak RSS,
 * under a 2 GiB address-space limit so that avro-c cannot take the machine;
 * avro-c reads the deep-nesting one in a child process, as it may crash.
 */
#include <avro.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "schema/schema.h"

static const char schema[] =
    "{\"type\":\"record\",\"name\":\"Telemetry\",\"namespace\":\"edge\",\"fields\":["
    "{\"name\":\"device\",\"type\":\"string\"},"
    "{\"name\":\"ts\",\"type\":\"long\"},"
    "{\"name\":\"seq\",\"type\":\"int\"},"
    "{\"name\":\"temp\",\"type\":\"double\"},"
    "{\"name\":\"humidity\",\"type\":\"float\"},"
    "{\"name\":\"ok\",\"type\":\"boolean\"},"
    "{\"name\":\"mode\",\"type\":{\"type\":\"enum\",\"name\":\"Mode\",\"symbols\":[\"IDLE\",\"RUN\",\"FAULT\"]}},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"map\",\"values\":\"string\"}},"
    "{\"name\":\"samples\",\"type\":{\"type\":\"array\",\"items\":\"float\"}},"
    "{\"name\":\"note\",\"type\":[\"null\",\"string\"]}]}";

static const char json_payload[] =
    "{\"device\":\"plant-3/line-2/pump-17\",\"ts\":1700000000123,\"seq\":4711,\"temp\":21.25,"
    "\"humidity\":40.5,\"ok\":true,\"mode\":\"RUN\",\"tags\":{\"site\":\"north\",\"fw\":\"2.4.1\"},"
    "\"samples\":[1.0,1.5,2.0,2.5,3.0,3.5,4.0,4.5],\"note\":{\"string\":\"nominal\"}}";

typedef struct buf {
    uint8_t b[512];
    size_t n;
} buf_t;

static void put_long(buf_t *h, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    do {
        uint8_t c = z & 0x7f;
        z >>= 7;
        h->b[h->n++] = c | (z ? 0x80 : 0);
    } while (z);
}

static void put_raw(buf_t *h, const void *p, size_t n)
{
    memcpy(h->b + h->n, p, n);
    h->n += n;
}

static void put_str(buf_t *h, const char *s)
{
    put_long(h, (int64_t)strlen(s));
    put_raw(h, s, strlen(s));
}

static void telemetry(buf_t *h)
{
    float hum = 40.5f, s;
    double temp = 21.25;
    put_str(h, "plant-3/line-2/pump-17");
    put_long(h, 1700000000123LL);
    put_long(h, 4711);
    put_raw(h, &temp, 8); /* x86 and ARM are little-endian, as Avro is */
    put_raw(h, &hum, 4);
    h->b[h->n++] = 1;
    put_long(h, 1);
    put_long(h, 2); put_str(h, "site"); put_str(h, "north"); put_str(h, "fw"); put_str(h, "2.4.1");
    put_long(h, 0);
    put_long(h, 8);
    for (int i = 0; i < 8; i++) {
        s = 1.0f + 0.5f * (float)i;
        put_raw(h, &s, 4);
    }
    put_long(h, 0);
    put_long(h, 1); put_str(h, "nominal");
}

typedef int (*validate_fn)(void *ctx, const uint8_t *p, size_t n);

static void run(const char *name, validate_fn fn, void *ctx, const uint8_t *p, size_t n,
                double seconds)
{
    uint64_t iters = 0, t0 = tb_mono_ns(), deadline = t0 + (uint64_t)(seconds * 1e9), now;
    do {
        for (int i = 0; i < 10000; i++) {
            if (fn(ctx, p, n) != 0) {
                fprintf(stderr, "%s: payload rejected\n", name);
                exit(1);
            }
        }
        iters += 10000;
        now = tb_mono_ns();
    } while (now < deadline);
    double secs = (double)(now - t0) / 1e9;
    printf("%-28s %7zu B  %12.0f validations/s  %8.1f MB/s  %6.0f ns/validation\n", name, n,
           (double)iters / secs, (double)iters * (double)n / secs / 1e6, secs * 1e9 / (double)iters);
}

static int ours(void *ctx, const uint8_t *p, size_t n)
{
    return sch_validate(ctx, p, n, NULL, 0);
}

typedef struct avro_c_ctx {
    avro_value_t value;
    avro_reader_t reader;
} avro_c_ctx_t;

static int avro_c(void *ctx, const uint8_t *p, size_t n)
{
    avro_c_ctx_t *c = ctx;
    avro_reader_memory_set_source(c->reader, (const char *)p, (int64_t)n);
    avro_value_reset(&c->value);
    return avro_value_read(c->reader, &c->value);
}

static long peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* One hostile payload through avro-c's reader and through the walker. */
static void hostile(const char *label, const char *schema_json, const uint8_t *p, size_t n,
                    bool in_child)
{
    avro_schema_t as;
    if (avro_schema_from_json_length(schema_json, strlen(schema_json), &as))
        exit(1);
    avro_value_iface_t *iface = avro_generic_class_from_schema(as);
    avro_value_t v;
    avro_generic_value_new(iface, &v);
    avro_reader_t r = avro_reader_memory((const char *)p, (int64_t)n);
    uint64_t t0 = tb_mono_ns(), t1;
    int rc;
    printf("%s\n", label);
    fflush(stdout);
    if (in_child) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(avro_value_read(r, &v) == 0 ? 0 : 1);
        int st = 0;
        waitpid(pid, &st, 0);
        t1 = tb_mono_ns();
        if (WIFSIGNALED(st))
            printf("  avro-c: killed by signal %d (%s) after %.3f ms\n", WTERMSIG(st),
                   strsignal(WTERMSIG(st)), (double)(t1 - t0) / 1e6);
        else
            printf("  avro-c: exit %d after %.3f ms\n", WEXITSTATUS(st), (double)(t1 - t0) / 1e6);
    } else {
        rc = avro_value_read(r, &v);
        t1 = tb_mono_ns();
        printf("  avro-c: rc=%d \"%s\" in %.3f ms, peak RSS so far %ld MB\n", rc,
               rc ? avro_strerror() : "", (double)(t1 - t0) / 1e6, peak_rss_mb());
    }
    avro_reader_free(r);
    avro_value_decref(&v);
    avro_value_iface_decref(iface);
    avro_schema_decref(as);

    char err[256] = "";
    sch_validator_t *val = NULL;
    if (sch_compile(SCH_AVRO, schema_json, strlen(schema_json), NULL, &val, err, sizeof err))
        exit(1);
    t0 = tb_mono_ns();
    rc = sch_validate(val, p, n, err, sizeof err);
    t1 = tb_mono_ns();
    printf("  walker: rc=%d \"%s\" in %.3f ms, peak RSS so far %ld MB\n", rc, rc ? err : "valid",
           (double)(t1 - t0) / 1e6, peak_rss_mb());
    sch_validator_unref(val);
}

static int run_hostile(void)
{
    struct rlimit lim = { .rlim_cur = (rlim_t)2 << 30, .rlim_max = (rlim_t)2 << 30 };
    if (setrlimit(RLIMIT_AS, &lim) != 0)
        perror("setrlimit");
    /* zigzag(2^31) as a varint, then 5 bytes: a 10-byte payload claiming 2 GiB */
    static const uint8_t str2g[] = { 0x80, 0x80, 0x80, 0x80, 0x10, 'a', 'b', 'c', 'd', 'e' };
    hostile("10-byte payload claiming a 2 GiB string", "\"string\"", str2g, sizeof str2g, false);
    /* zigzag(2^62) then the end marker: 2^62 nulls, valid by the specification */
    static const uint8_t nulls[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00 };
    hostile("array<null> block claiming 2^62 items", "{\"type\":\"array\",\"items\":\"null\"}",
            nulls, sizeof nulls, false);
    /* Recursive schema, one byte per level: 100 kB nesting 100000 deep. */
    static uint8_t deep[100000];
    memset(deep, 0x02, sizeof deep);
    hostile("100 kB payload nesting 100000 levels (recursive schema)",
            "{\"type\":\"record\",\"name\":\"T\",\"fields\":[{\"name\":\"kids\","
            "\"type\":{\"type\":\"array\",\"items\":\"T\"}}]}",
            deep, sizeof deep, true);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--avro-c-hostile"))
        return run_hostile();
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    buf_t h = { .n = 0 };
    telemetry(&h);

    char err[256];
    sch_validator_t *bin = NULL, *json = NULL;
    sch_opts_t ob = { .avro_encoding = SCH_AVRO_BINARY }, oj = { .avro_encoding = SCH_AVRO_JSON };
    if (sch_compile(SCH_AVRO, schema, strlen(schema), &ob, &bin, err, sizeof err) ||
        sch_compile(SCH_AVRO, schema, strlen(schema), &oj, &json, err, sizeof err)) {
        fprintf(stderr, "compile: %s\n", err);
        return 1;
    }

    avro_schema_t as;
    if (avro_schema_from_json_length(schema, strlen(schema), &as)) {
        fprintf(stderr, "avro-c: %s\n", avro_strerror());
        return 1;
    }
    avro_value_iface_t *iface = avro_generic_class_from_schema(as);
    avro_c_ctx_t c;
    avro_generic_value_new(iface, &c.value);
    c.reader = avro_reader_memory((const char *)h.b, (int64_t)h.n);

    printf("Avro telemetry record, 10 fields (%.1f s per figure)\n", seconds);
    run("walker (binary)", ours, bin, h.b, h.n, seconds);
    run("avro-c avro_value_read", avro_c, &c, h.b, h.n, seconds);
    run("walker (JSON encoding)", ours, json, (const uint8_t *)json_payload,
        strlen(json_payload), seconds);

    avro_reader_free(c.reader);
    avro_value_decref(&c.value);
    avro_value_iface_decref(iface);
    avro_schema_decref(as);
    sch_validator_unref(bin);
    sch_validator_unref(json);
    return 0;
}
