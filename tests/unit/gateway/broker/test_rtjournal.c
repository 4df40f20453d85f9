/*
 * The runtime QoS 2 journal (rtjournal.c, mqtt.qos2_state runtime): its
 * replay takes a record only for the restored session it was written for
 * (the nonce of the session's OPEN), the last record of each (client, id)
 * decides, a damaged record ends the replay, and the file is rewritten from
 * the live state; a runtime_dir that is not a RAM file system is refused
 * with a warning (the session journal keeps the ids).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper_broker.h"

#define MF_MAPPING "    - {mqtt_pattern: \"t/#\", danube_topic: /edge1/t, durability: memory_first}\n"

static uint32_t fnv(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static void be32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void header(tb_buf_t *b)
{
    uint8_t h[48] = "TRQ2";
    be32(h + 4, 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    cr_assert_not_null(f);
    char id[64] = { 0 };
    cr_assert_not_null(fgets(id, sizeof id, f));
    fclose(f);
    memcpy(h + 8, id, 36);
    be32(h + 44, fnv(h, 44));
    tb_buf_append(b, h, sizeof h);
}

static void rec(tb_buf_t *b, int op, uint16_t id, uint64_t nonce, const char *cid, bool damage)
{
    size_t cl = strlen(cid);
    uint8_t r[8 + 13 + 64];
    uint8_t *body = r + 8;
    body[0] = (uint8_t)op;
    body[1] = (uint8_t)(id >> 8);
    body[2] = (uint8_t)id;
    for (int i = 0; i < 8; i++)
        body[3 + i] = (uint8_t)(nonce >> (56 - 8 * i));
    body[11] = 0;
    body[12] = (uint8_t)cl;
    memcpy(body + 13, cid, cl);
    be32(r, (uint32_t)(13 + cl));
    be32(r + 4, fnv(body, 13 + cl) ^ (damage ? 1u : 0u));
    tb_buf_append(b, r, 8 + 13 + cl);
}

static broker_session_t *persistent(broker_t *srv, const char *cid, uint64_t nonce)
{
    broker_session_t *s = broker__session_create(srv, cid);
    broker__session_set_persistent(srv, s, true);
    s->journaled = true;
    s->nonce = nonce;
    return s;
}

static bool has_rt(const broker_session_t *s, uint16_t id)
{
    for (uint32_t i = 0; i < s->nqos2; i++)
        if (s->qos2[i] == id)
            return s->qos2_rt[i];
    return false;
}

static void count_rec(void *arg, const broker_rtj_rec_t *r)
{
    (void)r;
    ++*(int *)arg;
}

Test(rtjournal, replay_takes_only_its_sessions_records_and_the_last_of_each_id)
{
    char rt[] = "/dev/shm/tb_rtj_XXXXXX";
    cr_assert_not_null(mkdtemp(rt));
    char extra[256];
    snprintf(extra, sizeof extra, "  runtime_dir: \"%s/run\"\n", rt);
    hb_t h;
    char err[256];
    cr_assert_eq(hb_open_mappings(&h, extra, MF_MAPPING, err, sizeof err), 0, "%s", err);
    cr_assert(hb_log_has(&h, "runtime QoS 2 journal in use"));
    broker_t *srv = h.b;
    cr_assert(broker__rtj_on(srv));
    broker_session_t *a = persistent(srv, "a", 5), *b = persistent(srv, "b", 6);
    /* the file a kill left: a's ids 1 and 2 (2 released), b's 3 under another nonce (a session
     * ended and opened again), 4 of a client with no session, a's 9 after a damaged record */
    tb_buf_t f = { 0 };
    header(&f);
    rec(&f, 1, 1, 5, "a", false);
    rec(&f, 1, 2, 5, "a", false);
    rec(&f, 1, 3, 99, "b", false);
    rec(&f, 2, 2, 5, "a", false);
    rec(&f, 1, 4, 7, "c", false);
    rec(&f, 1, 8, 5, "a", true);
    rec(&f, 1, 9, 5, "a", false);
    broker__rtj_close(srv);
    char path[128];
    snprintf(path, sizeof path, "%s/run/qos2.journal", rt);
    int fd = open(path, O_WRONLY | O_TRUNC);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, f.data, f.len), (ssize_t)f.len);
    close(fd);
    tb_buf_free(&f);
    broker__rtj_open(srv);
    cr_assert(broker__rtj_on(srv));
    cr_assert(has_rt(a, 1), "a's id 1 restored, marked runtime");
    cr_assert_not(broker__session_has_qos2(a, 2), "released before the kill");
    cr_assert_not(broker__session_has_qos2(a, 8) || broker__session_has_qos2(a, 9), "after the damage");
    cr_assert_not(broker__session_has_qos2(b, 3), "another incarnation's id");
    cr_assert(hb_log_has(&h, "ids_restored=1 ids_of_no_session=2"));
    cr_assert(hb_log_has(&h, "ends in a damaged record"));
    /* rewritten from the live state: one record */
    int n = 0;
    fd = open(path, O_RDONLY);
    uint8_t buf[4096];
    ssize_t len = read(fd, buf, sizeof buf);
    close(fd);
    FILE *bf = fopen("/proc/sys/kernel/random/boot_id", "r");
    char id[64] = { 0 };
    cr_assert_not_null(fgets(id, sizeof id, bf));
    fclose(bf);
    size_t end;
    cr_assert_eq(broker_rtj_parse(buf, (size_t)len, id, count_rec, &n, &end), 1);
    cr_assert_eq(n, 1);
    /* a release goes to the runtime journal too, and is the last word on id 1 */
    cr_assert_eq(broker__rtj_put(srv, a, false, 1), 0);
    broker__session_del_qos2(a, 1);
    broker__rtj_close(srv);
    broker__rtj_open(srv);
    cr_assert_not(broker__session_has_qos2(a, 1));
    hb_close(&h);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", rt);
    cr_assert_eq(system(cmd), 0);
}

Test(rtjournal, a_runtime_dir_on_a_disk_is_refused_with_a_warning)
{
    char extra[256];
    snprintf(extra, sizeof extra, "  runtime_dir: \"/tmp/tb_rtj_disk_%d/run\"\n", (int)getpid());
    hb_t h;
    char err[256];
    cr_assert_eq(hb_open_mappings(&h, extra, MF_MAPPING, err, sizeof err), 0, "%s", err);
    cr_assert(hb_log_has(&h, "mqtt.runtime_dir is not on a RAM file system"), "no warning");
    cr_assert_not(broker__rtj_on(h.b));
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tb_rtj_disk_%d", (int)getpid());
    cr_assert_neq(access(dir, F_OK), 0, "nothing is created on the disk");
    hb_close(&h);
}

Test(rtjournal, journal_state_never_opens_it)
{
    char extra[256];
    snprintf(extra, sizeof extra, "  qos2_state: journal\n  runtime_dir: /dev/shm/tb_rtj_never_%d\n", (int)getpid());
    hb_t h;
    char err[256];
    cr_assert_eq(hb_open_mappings(&h, extra, MF_MAPPING, err, sizeof err), 0, "%s", err);
    cr_assert_not(broker__rtj_on(h.b));
    cr_assert_not(hb_log_has(&h, "runtime"));
    hb_close(&h);
}
