/*
 * config.h: edge.yaml, parsed into one typed struct from one table of keys
 * (the config/ folder's one public header).
 *
 * The table in config_table.c (key, type, default, bounds, description)
 * drives parsing, defaults, environment overrides, `tributary config
 * --describe` and the reference section of docs/CONFIG.md, so the four can
 * never disagree.
 *
 * Danube's own edge.yaml is accepted unchanged (same keys, same defaults);
 * our sections (wal, http, log, ...) add to it. Unknown keys are errors, so
 * a typo in a durability setting cannot pass silently. Every error names
 * file, line, column and key, and says what was expected.
 *
 * Strings may use ${NAME} (NAME = [A-Za-z_][A-Za-z0-9_]*), replaced from the
 * environment; an unset variable is an error naming it. ${1} and ${#} are
 * left alone (they are topic-template captures), and so are ${topic} and
 * ${upstream} in template keys (outputs[].remote_topic, outputs[].device):
 * there they are placeholders of the template, every other ${NAME} is
 * still the environment ("${SITE}/${topic}"). Environment variables
 * TRIBUTARY_<SECTION>_<KEY> (e.g. TRIBUTARY_WAL_FSYNC,
 * TRIBUTARY_MQTT_INGESTION_BATCH_SIZE) override the file.
 *
 * Prefix: cfg_.
 */
#ifndef CFG_CONFIG_H
#define CFG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { CFG_FSYNC_ALWAYS, CFG_FSYNC_INTERVAL, CFG_FSYNC_NEVER } cfg_fsync_t;
typedef enum { CFG_POLICY_NONE, CFG_POLICY_ENFORCE } cfg_policy_t;
typedef enum { CFG_ENC_BINARY, CFG_ENC_JSON } cfg_encoding_t;
typedef enum { CFG_UNMATCHED_REJECT, CFG_UNMATCHED_DROP } cfg_unmatched_t;
/* auth.allow_anonymous: auto is false when auth.password_file is set, else true */
typedef enum { CFG_ANON_AUTO, CFG_ANON_TRUE, CFG_ANON_FALSE } cfg_anon_t;
typedef enum { CFG_THROTTLE_DELAY, CFG_THROTTLE_REFUSE } cfg_throttle_t;
typedef enum { CFG_TLS_1_2, CFG_TLS_1_3 } cfg_tls_version_t;
/* mqtt.topic_mappings[].on_full: what the topic's log does at a disk bound.
 * The broker turns each into the WAL's policy (gateway/broker/server.c, a
 * switch the compiler holds to every member: a new one, block, cannot be
 * forgotten there). */
typedef enum { CFG_ON_FULL_DROP_OLDEST, CFG_ON_FULL_DROP_NEWEST, CFG_ON_FULL_BLOCK } cfg_on_full_t;
/* wal.durability and mqtt.topic_mappings[].durability (docs/WAL.md "The
 * memory tier"): log writes every message before its ack; memory_first
 * holds it in memory while the cluster confirms, and writes it only when
 * the cluster does not (wal.memory_first.*). */
typedef enum { CFG_DURABILITY_LOG, CFG_DURABILITY_MEMORY_FIRST } cfg_durability_t;
/* mqtt.qos2_state: where the QoS 2 packet ids of memory_first topics are kept */
typedef enum { CFG_QOS2_STATE_RUNTIME, CFG_QOS2_STATE_JOURNAL } cfg_qos2_state_t;
/* wal.memory_first.ack: when a memory_first message is acknowledged to its
 * publisher: once the cluster has it, or as soon as it is held. */
typedef enum { CFG_MF_ACK_UPSTREAM, CFG_MF_ACK_RECEIVED } cfg_mf_ack_t;
/* wal.retire: what a drained topic no mapping routes to becomes (gateway/retire.c) */
typedef enum { CFG_RETIRE_REMOVE, CFG_RETIRE_KEEP } cfg_retire_t;

/* A value of type "bytes or %": a size ("64MiB") or a share of a file system
 * ("2%", "0.5%"): one of the two fields is set, the other 0. */
typedef struct cfg_space {
    uint64_t bytes;
    uint32_t permille; /* tenths of a percent: "2%" is 20 */
} cfg_space_t;

typedef struct cfg_attr {
    char *name;   /* attribute name */
    char *ref;    /* "$1", "$2", ... or "$#" */
} cfg_attr_t;

typedef struct cfg_capvals {
    char *ref;      /* "$1" ... or "$#" */
    char **values;  /* allowed values of that capture */
    size_t nvalues;
} cfg_capvals_t;

/* outputs[].kind: where an output sends the log's messages (issue 17/18). */
typedef enum { CFG_OUTPUT_DANUBE, CFG_OUTPUT_MQTT, CFG_OUTPUT_SPARKPLUG } cfg_output_kind_t;
/* outputs[].historical (sparkplug, OUTPUTS.md 5.5): how replayed values go. */
typedef enum { CFG_SPB_HIST_FLAG, CFG_SPB_HIST_SEPARATE } cfg_spb_historical_t;

/* One entry of `outputs`. Without an `outputs` section the configuration
 * holds one implied entry {name: danube, kind: danube, topics: ["#"]}
 * (implied true), so every reader sees one shape. Keys of another kind
 * than the entry's are refused at load; those of its kind that were not
 * given hold their defaults (strings "" unless said). */
typedef struct cfg_output {
    char *name;                    /* [A-Za-z0-9_-]{1,64}, unique; "danube" only for kind danube */
    cfg_output_kind_t kind;
    char **topics;                 /* upstream topic filters it carries; default one: "#" */
    size_t ntopics;
    char *broker;                  /* mqtt, sparkplug: host:port of the remote broker */
    uint32_t protocol;             /* 4 (MQTT 3.1.1) or 5 */
    uint32_t qos;                  /* mqtt: 0..2 */
    char *client_id;               /* "" in the file: tributary-<edge_name>-<name> (filled at load) */
    char *remote_topic;            /* mqtt: a template (gateway/router/router.h), default "${topic}" */
    bool has_tls;                  /* a tls mapping was given */
    struct {
        char *ca_file, *cert_file, *key_file; /* "" = none (ca_file "": the system's roots) */
    } tls;
    char *username;
    char *password_file;           /* its first line is the password; never logged */
    uint32_t max_inflight;         /* mqtt, sparkplug: unacknowledged messages in flight */
    uint64_t max_bytes_per_s;      /* 0: no cap */
    uint32_t max_messages_per_s;   /* 0: no cap */
    char *group_id;                /* sparkplug: required */
    char *edge_node_id;            /* sparkplug: "" in the file: edge.edge_name (filled at load) */
    char *device;                  /* sparkplug: a one-level template over captures; NULL: node metrics */
    char *primary_host_id;         /* sparkplug: "" = no STATE awareness */
    cfg_spb_historical_t historical; /* sparkplug: flag (may share a payload with live) or separate */
    bool implied;                  /* the entry cfg_load made because `outputs` is absent */
    int line;                      /* where the entry starts, 1-based (0 when implied) */
} cfg_output_t;

typedef struct cfg_mapping {
    char *mqtt_pattern;
    char *danube_topic;
    char *schema_subject;          /* NULL when absent */
    cfg_policy_t validation_policy;
    cfg_encoding_t encoding;       /* Avro payload encoding */
    cfg_on_full_t on_full;         /* at a disk bound; every mapping of one upstream topic agrees */
    uint64_t max_age_ms;           /* older at send time: dropped unsent (0: none); mappings of a topic agree */
    uint32_t priority;             /* 0..255: higher drains first when an output is behind; a topic's agree */
    cfg_durability_t durability;   /* absent in the file: wal.durability (cfg_load resolves it); a topic's agree */
    bool durability_given;         /* the file gave it (else it follows wal.durability) */
    cfg_attr_t *attrs;
    size_t nattrs;
    cfg_capvals_t *capvals;
    size_t ncapvals;
    int line;                      /* where the mapping starts, 1-based */
} cfg_mapping_t;

/* A server's TLS keys: a `tls` mapping of mqtt.listeners[] and http.tls
 * (the same names, the same meaning; gateway/tls builds the context). */
typedef struct cfg_tls {
    char *cert_file;           /* PEM certificate (chain); required with tls */
    char *key_file;            /* PEM private key of cert_file; required with tls */
    char *ca_file;             /* PEM CAs client certificates are checked against; "" = none */
    bool require_client_cert;  /* a client without a certificate ca_file trusts fails the handshake */
    cfg_tls_version_t min_version;
    char *ciphers;             /* OpenSSL cipher list (TLS 1.2); "" = OpenSSL's default */
    bool use_identity_as_username; /* the client certificate's CN is the user name (listeners only:
                                      HTTP has no user names, http.tls has no such key) */
    uint32_t read_coalesce_ms;     /* listeners only: a busy connection's pause between reads (0: none) */
} cfg_tls_t;

/* One entry of mqtt.listeners. Without a tls mapping (has_tls false) the
 * tls fields hold their defaults and cert_file/key_file are NULL. */
typedef struct cfg_listener {
    char *address;                 /* host:port, [v6]:port */
    bool has_tls;                  /* a tls mapping was given */
    cfg_tls_t tls;
    cfg_anon_t allow_anonymous;    /* auto: auth.allow_anonymous */
    int line;                      /* where the entry starts, 1-based */
} cfg_listener_t;

typedef struct cfg {
    char *source; /* the file it came from, "<embedded default>", or
                     "<table defaults>" (cfg_defaults) */
    struct {
        char *edge_name;
        char *cluster_url;
        char *token;
        uint32_t heartbeat_interval_ms;
        struct {
            char *ca_file;   /* "" = gRPC's default roots */
            char *cert_file; /* "" = no client certificate */
            char *key_file;
        } tls;
    } edge;
    struct {
        uint32_t batch_size;
        uint32_t batch_timeout_ms;
        uint64_t max_batch_bytes;
        uint32_t max_inflight_batches;
        uint32_t ack_timeout_ms;
        uint32_t rpc_timeout_ms;
        uint32_t checkpoint_interval_ms;
        uint32_t live_window_ms;
        uint32_t retry_initial_ms;
        uint32_t retry_max_ms;
        uint32_t shutdown_grace_ms;
        uint32_t max_attempts;     /* read from a later release (issue 19: poison batches) */
    } replicator;
    struct {
        char *listener;
        uint32_t max_payload_size;
        uint32_t max_connections;
        uint32_t connect_timeout_ms;
        uint64_t max_unread_bytes;
        uint32_t write_timeout_ms;
        uint32_t packet_timeout_ms;
        uint64_t max_partial_bytes;
        uint32_t receive_maximum;
        uint32_t topic_alias_maximum;
        uint32_t max_session_expiry_s;
        uint32_t max_sessions;
        uint64_t max_journal_bytes;
        char *runtime_dir;            /* mqtt.runtime_dir: the runtime QoS 2 journal's directory (tmpfs) */
        cfg_qos2_state_t qos2_state;  /* mqtt.qos2_state */
        uint64_t max_will_bytes;
        cfg_unmatched_t unmatched;
        bool dead_letter;
        uint64_t dead_letter_max_bytes; /* read from a later release (issue 19: the log's own bound) */
        struct {
            uint32_t batch_size;
            uint32_t batch_timeout_ms;
            uint32_t idle_flush_ms;
            uint32_t idle_flush_max_ms;
            uint64_t max_pending_bytes;
        } ingestion;
        cfg_mapping_t *mappings;
        size_t nmappings;
        /* mqtt.listeners as the file gives it; empty (NULL, 0) when it does
         * not, and then `listener` is the one plain listener. */
        cfg_listener_t *listeners;
        size_t nlisteners;
    } mqtt;
    struct {
        char *dir;
        uint64_t segment_bytes;
        uint64_t max_topic_bytes;
        uint64_t max_total_bytes;
        cfg_fsync_t fsync;
        uint32_t fsync_interval_ms;
        cfg_space_t min_free_bytes; /* below it the log behaves as full */
        cfg_durability_t durability; /* the default of each mapping's durability */
        struct {
            cfg_mf_ack_t ack;
            uint32_t spill_after_ms;  /* the oldest held message waits at most this for the cluster */
            uint64_t memory_bytes;    /* the most a topic holds in memory */
        } memory_first;
        cfg_retire_t retire;        /* gateway/retire.c: removed or kept once drained */
    } wal;
    struct cfg_auth {
        char *password_file;       /* "" = none: user names are not checked */
        char *acl_file;            /* "" = none: every topic is writable */
        cfg_anon_t allow_anonymous;
        uint32_t max_failures;     /* per address within failure_window_ms; 0: no throttle */
        uint32_t failure_window_ms;
        cfg_throttle_t throttle;
        uint32_t throttle_delay_ms;
    } auth;
    struct {
        char *listener;
        char *auth_token_file;     /* "" = no token asked for */
        bool auth_probes;          /* /healthz and /readyz ask for it too */
        char *admin_token_file;    /* "" = none: the admin API serves loopback peers only */
        /* http.tls: HTTPS on http.listener. has_tls when the file has an
         * http.tls mapping or the environment sets an http.tls key; then
         * cert_file and key_file are required (as a listener's). Without
         * it the strings are "". */
        bool has_tls;
        cfg_tls_t tls;
    } http;
    struct {
        uint32_t stall_after_ms;
    } health;
    uint32_t shutdown_timeout_ms;
    struct {
        uint32_t watch_ms;         /* 0: off; the file watcher (gateway/watch.c) */
    } reload;
    /* outputs: never empty (the implied danube entry when the file has none) */
    cfg_output_t *outputs;
    size_t noutputs;
    struct {
        int level;   /* tb_log_level_t */
        int format;  /* tb_log_format_t */
    } log;
    unsigned refs_;  /* cfg_ref's extra owners (0: one owner); cfg_free frees at the last */
} cfg_t;

/*
 * Loads `path` (NULL: the embedded default, see cfg_embedded_default()),
 * applies defaults, ${NAME} substitution and TRIBUTARY_* overrides from
 * `envp` (NULL: the process environment), and validates. On success *out
 * is a new cfg_t (free with cfg_free). On failure *out is NULL and err
 * holds "file:line:col: key: message".
 */
int cfg_load(const char *path, char *const *envp, cfg_t **out, char *err, size_t errlen);
/* Same, from a YAML text in memory; `name` is used in error messages. */
int cfg_load_string(const char *name, const char *yaml, size_t len, char *const *envp,
                    cfg_t **out, char *err, size_t errlen);

/*
 * A configuration error in parts, for answers that are read by programs
 * (a reload's log fields, later the admin API's JSON): the file, the
 * 1-based line and column (0 when not known: an environment override, a
 * missing required key, a file that cannot be opened), the key ("" when
 * the error is not about one: a YAML syntax error says "(yaml)"), the
 * message alone, and `text`: the whole line exactly as cfg_load's err
 * ("file:line:col: key: message"), which is what people read. Every
 * field is NUL-terminated (truncated when longer).
 */
typedef struct cfg_err {
    char file[256];
    int line, column;
    char key[128];
    char message[512];
    char text[1024];
} cfg_err_t;
/* cfg_load and cfg_load_string, the error in parts (e zeroed on success). */
int cfg_load_ex(const char *path, char *const *envp, cfg_t **out, cfg_err_t *e /* OUT */);
int cfg_load_string_ex(const char *name, const char *yaml, size_t len, char *const *envp, cfg_t **out,
                       cfg_err_t *e /* OUT */);
/* Fills e from its parts; text becomes "file:line:col: key: message" (the
 * parts that are absent left out, as cfg_load prints them). */
void cfg_err_set(cfg_err_t *e, const char *file, int line, int column, const char *key, const char *message);
void cfg_free(cfg_t *cfg);
/* One more owner of cfg (any thread): each cfg_ref is paired with a cfg_free, and the last
 * cfg_free frees it. For a holder that outlives the caller's copy (an output added at a
 * reload whose start waits for the old one's stop, rep_engine_add_output). */
cfg_t *cfg_ref(const cfg_t *cfg);

/*
 * Every key's default from the table, as typed values: the one source for
 * code outside config/ that needs a default (rep_opts_default, the status
 * command's --http = cfg_defaults()->http.listener) instead of a copy of
 * it. Built by the same code that applies defaults before a file is read,
 * so cfg_load_string of a file that sets only the required keys differs
 * from it in those keys alone.
 *
 * Keys without a default: edge.edge_name and edge.cluster_url are NULL,
 * mqtt.topic_mappings is empty (mappings NULL, nmappings 0), and so is
 * mqtt.listeners (mqtt.listener is the one plain listener); outputs holds
 * the implied danube entry, as a file without `outputs` does. String keys
 * whose default is empty (edge.token, edge.tls.*) are "". source is
 * "<table defaults>". No environment is read (TRIBUTARY_* overrides and
 * ${NAME} do not apply) and no cross-key check is run.
 *
 * Built once (pthread_once) on first use and immutable after: any thread,
 * no lock. The result is static and lives for the process; never pass it
 * to cfg_free. Cannot fail (a table default that does not parse aborts,
 * and the unit tests load every one).
 */
const cfg_t *cfg_defaults(void);

/* The built-in configuration used by `tributary run` without -c: loopback
 * listeners, a data directory under `data_dir`. Returns YAML text (static). */
const char *cfg_embedded_default(void);

/* Prints every key: path, type, default, bounds, meaning. markdown=true
 * prints the table of docs/CONFIG.md's reference section. */
void cfg_describe(FILE *out, bool markdown);
/* Prints the effective configuration as YAML, secrets masked. */
void cfg_print(const cfg_t *cfg, FILE *out);

const char *cfg_fsync_name(cfg_fsync_t f);
/* "danube", "mqtt", "sparkplug" */
const char *cfg_output_kind_name(cfg_output_kind_t k);

/*
 * The key table, read-only, for tools and tests that walk every top-level
 * key (mapping keys are not listed). `type` is the name --describe prints
 * ("string", "integer", "milliseconds", "bytes", "enum", "address", "url",
 * ...); `offset` and `size` locate the key's field in cfg_t. cfg_key_at
 * returns false past the end; cfg_key_find false for an unknown path.
 */
typedef struct cfg_key_info {
    const char *path;   /* "replicator.batch_size" */
    const char *type;
    size_t offset;
    size_t size;
} cfg_key_info_t;
bool cfg_key_at(size_t i, cfg_key_info_t *out /* OUT */);
bool cfg_key_find(const char *path, cfg_key_info_t *out /* OUT */);

/* Calls cb with the path of every key whose value differs between a and b
 * ("wal.fsync", "mqtt.topic_mappings[2].validation_policy",
 * "mqtt.listeners[1].tls.cert_file"; a different number of mappings or
 * listeners is reported as "mqtt.topic_mappings" / "mqtt.listeners";
 * outputs are matched by name: "outputs[central].remote_topic", and one
 * added or removed is "outputs[central]").
 * Secrets are compared but never passed to cb by value. */
void cfg_diff(const cfg_t *a, const cfg_t *b, void (*cb)(void *arg, const char *key), void *arg);

/*
 * Reload class of a key: whether a reload (SIGHUP) applies a change to it
 * or it needs a restart. One flag per row of the key table (RL in
 * config_table.c) is the only source: gateway/reload.c asks this for every
 * key cfg_diff reports, `tributary config --describe --reloadable` lists
 * the live ones, and a unit test holds reload.c's appliers to the list.
 *
 * `path` is a top-level key ("log.level") or a key of a list entry in the
 * form cfg_diff reports ("mqtt.topic_mappings[2].validation_policy",
 * "mqtt.listeners[0].tls.cert_file", "outputs[central].qos") or with an
 * empty index ("mqtt.topic_mappings[].validation_policy"). Anything that is
 * not a key (a list whose length changed, "mqtt.listeners[1].tls" turned on
 * or off, an output added) is RESTART.
 *
 * A LIVE key inside a structure is applied while that structure keeps its
 * shape, and otherwise is named with the restart keys: a listener's tls.*
 * while the listeners keep their addresses and which of them are TLS;
 * http.tls.* while http.listener and whether it is TLS stay; a mapping's
 * validation_policy while every other key of that mapping stays.
 */
typedef enum { CFG_RELOAD_RESTART, CFG_RELOAD_LIVE } cfg_reload_class_t;
cfg_reload_class_t cfg_reload_class(const char *path);
/* Every key of the table in the generic form --describe prints
 * ("mqtt.topic_mappings[].on_full"), with its class; false past the end. */
bool cfg_key_path_at(size_t i, char *path, size_t len, cfg_reload_class_t *cls /* OUT */);
/* The LIVE keys, one a line (markdown: the list of docs/CONFIG.md's
 * "Reload classes" section). */
void cfg_describe_reloadable(FILE *out, bool markdown);

#endif
