/*
 * The master's recent log lines, for its page (GET /status.json, "log"): a bounded
 * ring of the last NDZ_LOGRING_LINES lines the daemon said (errors, warnings, what
 * happens, refusals), each with its wall-clock time and level. Locked inside: any
 * thread may add a line, the HTTP thread reads it.
 */
#ifndef NDZ_LOGRING_H
#define NDZ_LOGRING_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define NDZ_LOGRING_LINES 200          /* lines kept; the oldest goes first */
#define NDZ_LOGRING_TEXT 240           /* bytes of a line kept (longer ones are cut) */

struct ndz_logring;

/*
 * ndz_logring_new - an empty ring: 0 and *out, or NDZ_ENOMEM with e set.
 * ndz_logring_free accepts NULL.
 */
int ndz_logring_new(struct ndz_logring **out, struct ndz_error *e);
void ndz_logring_free(struct ndz_logring *r);

/*
 * ndz_logring_add - one line: level -1 a warning, 0 an error, 1 what happens, 2 more,
 * 3 a refusal; wall_s its time (Unix seconds); text without its newline (control
 * characters kept out). r may be NULL: nothing.
 */
void ndz_logring_add(struct ndz_logring *r, int level, uint64_t wall_s, const char *text);

/*
 * ndz_logring_json - the lines, oldest first, as a JSON array of {"time":S,"level":
 * "error"|"warning"|"info"|"debug"|"refused","text":..} into buf (cap bytes,
 * NUL-terminated): its length, 0 when it does not fit.
 */
size_t ndz_logring_json(struct ndz_logring *r, char *buf, size_t cap);

#endif
