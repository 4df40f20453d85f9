/*
 * test_mqtt_codec_fixtures.c: replays the files written by
 * tests/data/mqtt/gen_fixtures.py: every known-bad packet in
 * tests/data/mqtt/bad/ must fail with the reason its INDEX line names, and
 * every valid-* fuzz seed must decode whole, packet after packet, and
 * survive encode -> decode unchanged. The second half keeps the fuzz corpus
 * honest: a seed that does not decode would only teach the fuzzer about
 * error paths.
 */
#include "helper_mqtt_codec.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir_of(const char *env, const char *fallback)
{
    const char *v = getenv(env);
    return v && *v ? v : fallback;
}

static size_t slurp(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    size_t n = fread(buf, 1, cap, f);
    cr_assert(feof(f), "%s is larger than %zu bytes", path, cap);
    fclose(f);
    return n;
}

Test(mqtt_fixtures, every_known_bad_packet_fails_with_its_reason)
{
    char path[4096], line[512];
    const char *data = dir_of("TRIB_TESTDATA", "tests/data");
    snprintf(path, sizeof path, "%s/mqtt/bad/INDEX", data);
    FILE *idx = fopen(path, "r");
    cr_assert_not_null(idx, "cannot open %s", path);
    int checked = 0;
    while (fgets(line, sizeof line, idx)) {
        char name[128];
        unsigned version, max, reason;
        if (line[0] == '#' || sscanf(line, "%127s %u %u %x", name, &version, &max, &reason) != 4)
            continue;
        static uint8_t buf[1 << 16];
        snprintf(path, sizeof path, "%s/mqtt/bad/%s.bin", data, name);
        size_t n = slurp(path, buf, sizeof buf);
        mqtt_packet_t pkt;
        mqtt_diag_t d;
        int rc = mqtt_decode(buf, n, (uint8_t)version, max, &pkt, &d);
        cr_expect_lt(rc, 0, "%s: decode returned %d", name, rc);
        cr_expect_eq(d.reason, reason, "%s: reason 0x%02x (%s), expected 0x%02x", name, d.reason,
                     d.why ? d.why : "-", reason);
        checked++;
    }
    fclose(idx);
    cr_assert_geq(checked, 50, "only %d fixtures found", checked);
}

/* Same selector convention as tests/fuzz/fuzz_mqtt_codec.c. */
static uint8_t selector_version(uint8_t sel)
{
    static const uint8_t v[4] = { 0, MQTT_V311, MQTT_V5, MQTT_V31 };
    return v[sel & 3];
}

static int replay_session(const char *name, const uint8_t *buf, size_t n)
{
    uint8_t version = selector_version(buf[0]);
    size_t off = 1;
    int packets = 0;
    while (off < n) {
        mqtt_packet_t pkt;
        mqtt_diag_t d;
        int rc = mqtt_decode(buf + off, n - off, version, 0, &pkt, &d);
        cr_assert_gt(rc, 0, "%s: packet %d at offset %zu: %d (%s)", name, packets, off, rc, d.why ? d.why : "-");
        tmq_assert_roundtrip(&pkt);
        if (pkt.type == MQTT_CONNECT)
            version = pkt.version;
        off += (size_t)rc;
        packets++;
    }
    return packets;
}

Test(mqtt_fixtures, every_valid_seed_decodes_whole_and_roundtrips)
{
    char path[4096];
    const char *src = dir_of("TRIB_SOURCE_DIR", ".");
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/mqtt_codec", src);
    DIR *dir = opendir(path);
    cr_assert_not_null(dir, "cannot open %s", path);
    struct dirent *e;
    int seeds = 0;
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, "valid-", 6) != 0)
            continue;
        char file[4352];
        static uint8_t buf[1 << 16];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        size_t n = slurp(file, buf, sizeof buf);
        cr_assert_gt(replay_session(e->d_name, buf, n), 0, "%s holds no packet", e->d_name);
        seeds++;
    }
    closedir(dir);
    cr_assert_geq(seeds, 20, "only %d valid seeds found", seeds);
}
