/*
 * gateway/auth: Mosquitto's password file and acl_file, read the way
 * Mosquitto 2 reads them, so an operator brings their files along
 * (docs/SECURITY.md).
 *
 * Pure: base and libcrypto (OpenSSL 3) only, no libuv, no I/O besides the
 * *_load helpers that read one file. Every object is immutable once built
 * and reference counted, so a check running on libuv's thread pool keeps
 * the file it started with while a reload swaps in the next one.
 *
 * Why our own parser: libmosquitto (the client library) has no password or
 * ACL code, and the broker's is not a library; the formats are small.
 */
#ifndef TB_AUTH_H
#define TB_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a file failed to parse: "FILE:LINE: what". */
typedef struct auth_error {
    char msg[320];
    unsigned line; /* 1-based; 0 when not about one line (cannot open, too big) */
} auth_error_t;

/* Files bigger than this are refused (a password file of 100,000 users is ~15 MB). */
#define AUTH_MAX_FILE_BYTES (64u << 20)

/* ---- password file --------------------------------------------------------
 * One entry per line, `user:hash`, as mosquitto_passwd writes it:
 *   $7$ITERATIONS$SALT$HASH   PBKDF2-HMAC-SHA512 (Mosquitto 2; Debian's
 *                             mosquitto_passwd: 101 iterations, 12-byte salt)
 *   $6$SALT$HASH              SHA-512 over password then salt (Mosquitto 1.x)
 * SALT and HASH in base64. Blank lines and lines whose first non-blank is
 * `#` are skipped; trailing CR/LF and spaces are dropped. A user name
 * appearing twice, a line without `:`, an unknown or malformed hash is an
 * error naming the line. */
typedef struct auth_passwd auth_passwd_t;

/* Parses text (len bytes, need not be NUL-terminated). name is used in
 * error messages. 0 and *out (refcount 1), or -1 and *err. */
int auth_passwd_parse(const char *name, const char *text, size_t len, auth_passwd_t **out, auth_error_t *err);
int auth_passwd_load(const char *path, auth_passwd_t **out, auth_error_t *err);
auth_passwd_t *auth_passwd_ref(auth_passwd_t *p);  /* thread-safe (atomic) */
void auth_passwd_unref(auth_passwd_t *p);          /* NULL is fine */
size_t auth_passwd_count(const auth_passwd_t *p);

typedef enum {
    AUTH_OK = 0,
    AUTH_BAD_PASSWORD, /* the user exists, the password is not its */
    AUTH_NO_USER,      /* no such user (the same work is done: no timing oracle) */
} auth_result_t;

/* Checks user/password against p. Slow by design (PBKDF2): call it off the
 * event loop. Safe from any thread; the comparison is constant time; an
 * unknown user costs a hash of the same kind as a known one. */
auth_result_t auth_passwd_check(const auth_passwd_t *p, const char *user, size_t user_len, const uint8_t *password,
                                size_t password_len);

/* Writes the `$7$` hash of password (PBKDF2-HMAC-SHA512, iterations, a
 * fresh 12-byte random salt) into out as "$7$ITER$SALT$HASH" with a NUL;
 * returns its length, or -1 when outlen is too small or the RNG fails. */
int auth_passwd_hash(const uint8_t *password, size_t password_len, unsigned iterations, char *out, size_t outlen);
#define AUTH_PASSWD_DEFAULT_ITERATIONS 101 /* what Mosquitto 2's mosquitto_passwd writes */
#define AUTH_PASSWD_HASH_MAX 160

/* ---- acl_file --------------------------------------------------------------
 * Mosquitto's acl_file:
 *   topic [read|write|readwrite|deny] TOPIC     (access omitted: readwrite)
 *   user USERNAME                               (the topic lines after it are that user's)
 *   pattern [read|write|readwrite|deny] TOPIC   (every client; %u user name, %c client id)
 * `topic` lines before the first `user` line apply to clients without a
 * user name. A client with no user name never matches a pattern holding %u.
 * `deny` wins over any grant; nothing granted is denied. Comments and blank
 * lines as in the password file. */
typedef struct auth_acl auth_acl_t;

typedef enum { AUTH_ACL_READ = 1, AUTH_ACL_WRITE = 2 } auth_access_t;

int auth_acl_parse(const char *name, const char *text, size_t len, auth_acl_t **out, auth_error_t *err);
int auth_acl_load(const char *path, auth_acl_t **out, auth_error_t *err);
auth_acl_t *auth_acl_ref(auth_acl_t *a);
void auth_acl_unref(auth_acl_t *a);
size_t auth_acl_rules(const auth_acl_t *a); /* rules read (topic and pattern lines) */

/* May a client (user NULL: no user name) have access to topic (a topic
 * name, no wildcards; tlen bytes)? Fast: on the event loop, per PUBLISH. */
bool auth_acl_allows(const auth_acl_t *a, const char *user, const char *client_id, const char *topic, size_t tlen,
                     auth_access_t access);

#endif
