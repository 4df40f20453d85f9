/*
 * auth_int.h: what gateway/auth's files share and nothing else sees (its
 * unit tests aside).
 *
 * auth_file.c   reading one file (size-limited), splitting lines, errors
 * passwd.c      the password file: parse, lookup, check, reference count
 * passwd_hash.c base64 and the two digests ($6$, $7$), auth_passwd_hash
 * acl.c         the acl_file: parse, reference count, auth_acl_allows
 * acl_match.c   topic filters: validity, and matching with %u / %c
 * Prefix: auth__ (cross-file internals).
 */
#ifndef GATEWAY_AUTH_AUTH_INT_H
#define GATEWAY_AUTH_AUTH_INT_H

#include "gateway/auth/auth.h"

#include <stdarg.h>

/* ---- auth_file.c ----------------------------------------------------------- */

/* Fills err (may be NULL) with "NAME:LINE: what" (line 0: "NAME: what"). */
void auth__error(auth_error_t *err, const char *name, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads the whole file at path, refusing one over AUTH_MAX_FILE_BYTES.
 * 0 and *text (tb_malloc'd, NUL-terminated, caller frees) / *len, or -1 and *err. */
int auth__read_file(const char *path, char **text, size_t *len, auth_error_t *err);

/* Line by line over text: each line without its "\n", trailing CR, spaces
 * and tabs, and without leading spaces and tabs. */
typedef struct auth__lines {
    const char *p, *end;
    unsigned line; /* of the line last returned, 1-based */
} auth__lines_t;

void auth__lines_init(auth__lines_t *it, const char *text, size_t len);
/* false at the end of the text. */
bool auth__lines_next(auth__lines_t *it, const char **line, size_t *len);
/* Blank or a comment (first non-blank is '#'). */
bool auth__line_skip(const char *line, size_t len);

/* Length-bounded message excerpt of s for errors: at most 64 bytes. */
#define AUTH__EXCERPT(len) ((int)((len) > 64 ? 64 : (len)))

/* ---- passwd_hash.c --------------------------------------------------------- */

#define AUTH__SALT_LEN 12 /* what Mosquitto 2 requires of both $6$ and $7$ */
#define AUTH__HASH_LEN 64 /* SHA-512 */

/* Strict base64 (RFC 4648 alphabet, '=' padding optional but, when present,
 * right): true when s decodes to exactly outlen bytes. */
bool auth__b64_decode(const char *s, size_t len, uint8_t *out, size_t outlen);

typedef enum { AUTH__PW_SHA512 = 6, AUTH__PW_PBKDF2 = 7 } auth__pw_kind_t;

/* The digest of password for one entry's kind, salt and iterations into
 * out[AUTH__HASH_LEN]; false when OpenSSL fails. */
bool auth__pw_digest(auth__pw_kind_t kind, unsigned iterations, const uint8_t salt[AUTH__SALT_LEN],
                     const uint8_t *password, size_t password_len, uint8_t out[AUTH__HASH_LEN]);

/* ---- acl_match.c ------------------------------------------------------------ */

/* NULL when filter (a topic or pattern line's topic) is a valid MQTT topic
 * filter: '+' and '#' whole levels, '#' last, at most 65535 bytes;
 * otherwise what is wrong. */
const char *auth__filter_invalid(const char *filter, size_t len);

/* Does filter (valid) match topic (a topic name: non-empty, no '+' or
 * '#'; the caller checks)? When subst, "%u" and "%c" in the filter stand
 * for user / client_id, which the caller guarantees non-NULL, non-empty
 * and free of '+', '#' and '/' for every reference the filter holds. A
 * wildcard never matches a first level starting with '$'. */
bool auth__filter_match(const char *filter, size_t flen, const char *topic, size_t tlen, bool subst,
                        const char *user, const char *client_id);

#endif
