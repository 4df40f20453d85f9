/*
 * base.h: the few things every folder needs and nothing else.
 *
 *  - error codes: 0 is success, -errno for the OS, TB_E* for our own range;
 *    tb_strerror() names any of them.
 *  - allocation that aborts on out-of-memory (sizes that come from the
 *    network are bounded by configuration before they get here).
 *  - clocks.
 *  - structured logging (logfmt text or JSON lines) with a rate limiter.
 *  - the thread mailbox: a locked intrusive FIFO plus one wake-up.
 *  - a growable byte buffer (tb_buf_t).
 *
 * Prefix: tb_ (public), tb__ (internal to base/).
 */
#ifndef TB_BASE_H
#define TB_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>

/* ---- errors ------------------------------------------------------------ */

enum {
    TB_EMALFORMED = -10001, /* bytes from outside do not parse */
    TB_ECORRUPT   = -10002, /* on-disk data fails its checksum or format */
    TB_ESCHEMA    = -10003, /* a schema does not compile */
    TB_EINVALID   = -10004, /* a payload fails validation */
    TB_ECONFIG    = -10005, /* configuration is wrong */
    TB_EPROTO     = -10006, /* peer broke the protocol */
    TB_ENOTREADY  = -10007, /* topic not ready */
    TB_EFULL      = -10008, /* a bound was reached */
    TB_ECLOSED    = -10009, /* the object is closing or closed */
    TB_EUNSUPPORTED = -10010, /* a valid request we do not implement */
    TB_EBUSY      = -10011, /* not drained yet (a topic to retire still has a backlog) */
};

/* Returns a static string for 0, -errno or a TB_E* code. */
const char *tb_strerror(int rc);

/* ---- memory ------------------------------------------------------------ */

void *tb_malloc(size_t n);
void *tb_calloc(size_t nmemb, size_t size);
void *tb_realloc(void *p, size_t n);
char *tb_strdup(const char *s);
char *tb_strndup(const char *s, size_t n);
/* Formats into a new heap string (caller frees). */
char *tb_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define TB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TB_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TB_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TB_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- clocks ------------------------------------------------------------ */

uint64_t tb_mono_ns(void);   /* CLOCK_MONOTONIC */
uint64_t tb_mono_ms(void);
uint64_t tb_wall_ms(void);   /* ms since the Unix epoch */

/* ---- logging ----------------------------------------------------------- */

typedef enum { TB_LOG_DEBUG, TB_LOG_INFO, TB_LOG_WARN, TB_LOG_ERROR, TB_LOG_OFF } tb_log_level_t;
typedef enum { TB_LOG_TEXT, TB_LOG_JSON } tb_log_format_t;

typedef enum { TB_KV_STR, TB_KV_INT, TB_KV_UINT, TB_KV_DBL, TB_KV_BOOL } tb_kv_type_t;
typedef struct tb_kv {
    const char *key;
    tb_kv_type_t type;
    union { const char *s; long long i; unsigned long long u; double d; bool b; } v;
} tb_kv_t;

/* Field constructors for tb_log(): tb_log(TB_LOG_WARN, "msg", TB_S("topic", t), TB_I("rc", rc)). */
#define TB_S(k, x) (&(tb_kv_t){ .key = (k), .type = TB_KV_STR,  .v.s = (x) })
#define TB_I(k, x) (&(tb_kv_t){ .key = (k), .type = TB_KV_INT,  .v.i = (long long)(x) })
#define TB_U(k, x) (&(tb_kv_t){ .key = (k), .type = TB_KV_UINT, .v.u = (unsigned long long)(x) })
#define TB_D(k, x) (&(tb_kv_t){ .key = (k), .type = TB_KV_DBL,  .v.d = (double)(x) })
#define TB_B(k, x) (&(tb_kv_t){ .key = (k), .type = TB_KV_BOOL, .v.b = (x) })
#define TB_ERR(rc) TB_S("error", tb_strerror(rc))

void tb_log_setup(tb_log_level_t level, tb_log_format_t format, int fd);
void tb_log_set_level(tb_log_level_t level);
tb_log_level_t tb_log_get_level(void);
bool tb_log_enabled(tb_log_level_t level);
/* Writes one line (one write(2)) with ts, level, msg and the fields. Thread-safe. */
void tb_log_kv(tb_log_level_t level, const char *msg, const tb_kv_t *const *kv, size_t n);
#define tb_log(level, msg, ...)                                                   \
    do {                                                                          \
        if (tb_log_enabled(level)) {                                              \
            const tb_kv_t *const tb__kv[] = { NULL, ##__VA_ARGS__ };              \
            tb_log_kv((level), (msg), tb__kv + 1, TB_ARRAY_LEN(tb__kv) - 1);      \
        }                                                                         \
    } while (0)
#define tb_debug(msg, ...) tb_log(TB_LOG_DEBUG, msg, ##__VA_ARGS__)
#define tb_info(msg, ...)  tb_log(TB_LOG_INFO,  msg, ##__VA_ARGS__)
#define tb_warn(msg, ...)  tb_log(TB_LOG_WARN,  msg, ##__VA_ARGS__)
#define tb_error(msg, ...) tb_log(TB_LOG_ERROR, msg, ##__VA_ARGS__)

int tb_log_level_parse(const char *s, tb_log_level_t *out);
const char *tb_log_level_name(tb_log_level_t l);

/*
 * Rate limiter for a repeated log line: at most one line per interval, and
 * that line carries how many were suppressed since the last one. Thread-safe
 * (a flapping client on the loop and the disk on the writer thread may share one).
 *
 *   static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
 *   uint64_t skipped;
 *   if (tb_ratelimit(&rl, &skipped)) tb_warn("disk full", TB_U("suppressed", skipped));
 */
typedef struct tb_ratelimit {
    uint64_t interval_ms;
    uint64_t last_ms;     /* start of the current interval */
    uint64_t suppressed;
    uint32_t burst;       /* lines allowed per interval (0 means 1) */
    uint32_t used;        /* of them, in the current interval */
    pthread_mutex_t mu;
} tb_ratelimit_t;
#define TB_RATELIMIT_INIT(ms) { (ms), 0, 0, 1, 0, PTHREAD_MUTEX_INITIALIZER }
/* n lines per interval, then suppressed until the next one (per-connection lines). */
#define TB_RATELIMIT_BURST_INIT(ms, n) { (ms), 0, 0, (n), 0, PTHREAD_MUTEX_INITIALIZER }
bool tb_ratelimit(tb_ratelimit_t *rl, uint64_t *suppressed /* OUT */);

/* ---- mailbox ------------------------------------------------------------ */

/*
 * A locked intrusive FIFO between threads (h2o's multithread pattern). The
 * sender pushes nodes it gives away; the wake function runs only when the
 * list goes from empty to non-empty (wake-ups coalesce), so the receiver
 * must drain the whole list with tb_mbox_take() each time it wakes.
 */
typedef struct tb_mnode { struct tb_mnode *next; } tb_mnode_t;
typedef struct tb_mbox {
    pthread_mutex_t mu;
    tb_mnode_t *head, *tail;
    void (*wake)(void *arg);
    void *wake_arg;
} tb_mbox_t;

void tb_mbox_init(tb_mbox_t *mb, void (*wake)(void *arg), void *wake_arg);
void tb_mbox_destroy(tb_mbox_t *mb);
void tb_mbox_push(tb_mbox_t *mb, tb_mnode_t *node);
/* Splices out every queued node, oldest first; NULL when empty. */
tb_mnode_t *tb_mbox_take(tb_mbox_t *mb);

/* ---- byte buffer (buf.c) ------------------------------------------------ */

/*
 * A growable byte buffer. The HTTP handlers and the metrics writers build
 * response bodies with it, the CLI collects HTTP answers in it. It is kept
 * NUL-terminated (cap > len) so a body can be read as a C string in tests
 * and logs. Growth aborts on out-of-memory (tb_realloc): callers bound what
 * they append by what it describes, never by input from the network.
 */
typedef struct tb_buf {
    char *data;  /* NULL until the first append; then NUL-terminated */
    size_t len;
    size_t cap;
} tb_buf_t;

#define TB_BUF_INIT { NULL, 0, 0 }

void tb_buf_append(tb_buf_t *b, const void *p, size_t n);
void tb_buf_puts(tb_buf_t *b, const char *s);
void tb_buf_putc(tb_buf_t *b, char c);
void tb_buf_printf(tb_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tb_buf_vprintf(tb_buf_t *b, const char *fmt, va_list ap);
/* Empties the buffer and keeps its memory. */
void tb_buf_reset(tb_buf_t *b);
/* Frees the memory; the buffer is empty (TB_BUF_INIT) afterwards. */
void tb_buf_free(tb_buf_t *b);
/* The contents as a C string ("" when nothing was appended). */
const char *tb_buf_str(const tb_buf_t *b);

/* ---- small helpers ------------------------------------------------------ */

/* Atomic file replace: write tmp, fsync, rename, fsync dir. Returns 0 or -errno. */
int tb_write_file_atomic(const char *path, const void *data, size_t len);
/* mkdir -p; returns 0 or -errno. */
int tb_mkdir_p(const char *path, unsigned mode);
/* fsync a directory by path; returns 0 or -errno. */
int tb_fsync_dir(const char *path);
/* true if s is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool tb_utf8_valid(const uint8_t *s, size_t n);

#endif
