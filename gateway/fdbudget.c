/*
 * fdbudget.c: the process's file descriptors, shared out before the MQTT
 * listener opens, so that clients can never take the ones the log needs.
 *
 * Seen: at RLIMIT_NOFILE 1024 with 1,004 idle clients, publishing stopped
 * because a new segment could not be opened ("Too many open files"). Now,
 * with the log, the replicator and the HTTP listener already open, the
 * budget counts what is open, then reserves:
 *   - the log: 2 per topic (a rotation opens the next segment before the
 *     last is closed; a reader reopens at a segment change) + 8 for meta
 *     files written by atomic replace, the directory syncs and the lock;
 *   - the replicator: 16 (gRPC's sockets while it reconnects, its wake-ups);
 *   - each MQTT output (replicator/rep_mqtt.c): its socket to the remote,
 *     libmosquitto's wake-up socketpair, a TLS file read at a reconnect, and
 *     per topic it carries a log reader that reopens at a segment change
 *     (2); its eventfd is open already (counted);
 *   - the operator's endpoint: its connection cap + 1 for a 503 refusal;
 *   - the MQTT broker: its listening sockets, and BROKER_REFUSAL_HEADROOM
 *     sockets past max_connections, accepted to be refused.
 * What is left is the most MQTT sockets the process can hold. The soft
 * limit is raised toward the hard one when that makes mqtt.max_connections
 * fit; if it still does not, max_connections is lowered to what fits and a
 * warning says so with every figure; with room for no client at all the
 * start fails.
 */
#include "gateway/gateway_int.h"
#include "base/base.h"

#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>

#define LOG_FDS_PER_TOPIC 2u
#define LOG_FDS_SPARE 8u
#define REPLICATOR_FDS 16u
#define MQTT_OUTPUT_FDS 4u
#define MQTT_OUTPUT_FDS_PER_TOPIC 2u

/* The descriptors the MQTT outputs may open once running (the topics an
 * output carries are at most ntopics: its filters are not matched here). */
static uint64_t outputs_fds(const cfg_t *cfg, size_t ntopics)
{
    uint64_t n = 0;
    for (size_t i = 0; i < cfg->noutputs; i++)
        if (cfg->outputs[i].kind != CFG_OUTPUT_DANUBE)
            n += MQTT_OUTPUT_FDS + (uint64_t)ntopics * MQTT_OUTPUT_FDS_PER_TOPIC;
    return n;
}

static uint64_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    uint64_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n ? n - 1 : 0; /* the directory's own descriptor */
}

int gw__fd_budget(const cfg_t *cfg, size_t ntopics, unsigned http_conns, uint32_t *max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -errno;
    uint64_t open = open_fds();
    uint64_t reserved = open + (ntopics + 2) * LOG_FDS_PER_TOPIC + LOG_FDS_SPARE + REPLICATOR_FDS + outputs_fds(cfg, ntopics) +
                        http_conns + 1 + BROKER_REFUSAL_HEADROOM + (cfg->mqtt.nlisteners ? cfg->mqtt.nlisteners : 1);
    uint64_t want = reserved + cfg->mqtt.max_connections;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rlim_t to = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        if (to > rl.rlim_cur) {
            struct rlimit raised = { to, rl.rlim_max };
            if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
                tb_info("raised the descriptor limit for mqtt.max_connections", TB_U("from", rl.rlim_cur),
                        TB_U("to", to), TB_U("hard", rl.rlim_max));
                rl.rlim_cur = to;
            }
        }
    }
    uint64_t room = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur > reserved ? rl.rlim_cur - reserved : 0;
    *max_connections = cfg->mqtt.max_connections;
    if (room >= cfg->mqtt.max_connections)
        return 0;
    if (room == 0) {
        tb_error("not enough file descriptors for a single MQTT client: raise RLIMIT_NOFILE (ulimit -n) or "
                 "lower what is reserved (topics, http connections)",
                 TB_U("limit", rl.rlim_cur), TB_U("open", open), TB_U("reserved", reserved));
        return TB_ECONFIG;
    }
    *max_connections = (uint32_t)room;
    tb_warn("RLIMIT_NOFILE is too low for mqtt.max_connections: lowered so that the log, the replicator and the "
            "HTTP endpoint keep their descriptors",
            TB_U("max_connections", cfg->mqtt.max_connections), TB_U("lowered_to", room), TB_U("limit", rl.rlim_cur),
            TB_U("hard_limit", rl.rlim_max), TB_U("open", open), TB_U("reserved", reserved));
    return 0;
}
