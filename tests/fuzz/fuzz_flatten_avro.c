/* fuzz-lib: tb_schema */
/*
 * fuzz_flatten_avro.c: sch_flatten_avro on a device's Avro payload (outside
 * bytes). The first byte picks one of a few writer schemas (flat telemetry,
 * nested records with unions, arrays and maps, a recursive record); the rest
 * is the datum. Aborts if an accepted datum yields an empty, overlong or
 * repeated path, a string that is not UTF-8, or differs on a second walk;
 * or if a refusal gives no reason.
 */
#define FUZZ_NAME "fuzz_flatten_avro"
#include "flat_check.h"

static const char *SCHEMAS[] = {
    ("{\"type\":\"record\",\"name\":\"T\",\"fields\":[{\"name\":\"temp\",\"type\":\"double\"},"
    "{\"name\":\"n\",\"type\":\"long\"},{\"name\":\"i\",\"type\":\"int\"},{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"on\",\"type\":\"boolean\"},{\"name\":\"s\",\"type\":\"string\"},{\"name\":\"b\",\"type\":\"bytes\"},"
    "{\"name\":\"x\",\"type\":{\"type\":\"fixed\",\"name\":\"X\",\"size\":2}},"
    "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\"]}}]}"),
    ("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":"
    "[\"null\",\"int\",{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":\"v\",\"type\":\"double\"}]}]}},"
    "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":{\"type\":\"map\",\"values\":\"string\"}}}]}"),
    ("{\"type\":\"record\",\"name\":\"N\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"},"
    "{\"name\":\"next\",\"type\":[\"null\",\"N\"]},{\"name\":\"kids\",\"type\":{\"type\":\"array\",\"items\":\"N\"}}]}"),
};
#define NSCHEMAS (sizeof SCHEMAS / sizeof SCHEMAS[0])

typedef struct {
    sch_validator_t *schema;
    const uint8_t *data;
    size_t size;
} input_t;

static int walk(const void *ctx, seen_t *s, char *err, size_t errlen)
{
    const input_t *in = ctx;
    return sch_flatten_avro(in->schema, in->data, in->size, leaf, s, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sch_validator_t *v[NSCHEMAS];
    if (!v[0]) {
        for (size_t i = 0; i < NSCHEMAS; i++) {
            char err[256];
            CHECK(sch_compile(SCH_AVRO, SCHEMAS[i], strlen(SCHEMAS[i]), NULL, &v[i], err, sizeof err) == 0,
                  "schema %zu: %s", i, err);
        }
    }
    if (size < 1 || size > 16384) /* paths are compared pairwise: keep a case fast */
        return 0;
    sch_validator_t *s = v[data[0] % NSCHEMAS];
    input_t in = { s, data + 1, size - 1 };
    flat_check_twice(walk, &in);
    return 0;
}
