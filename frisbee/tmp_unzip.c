/* TEMPORARY until lib/unzip.c lands in main: restoring is refused (use --raw). */
#include <stddef.h>

#include "err.h"
#include "unzip.h"

void ndz_unzip_opts_init(struct ndz_unzip_opts *o) { (void)o; }
int ndz_unzip_create(struct ndz_io *t, const struct ndz_unzip_opts *o, struct ndz_unzip **u)
{ (void)t; (void)o; *u = NULL; return NDZ_ENOTSUP; }
int ndz_unzip_put(struct ndz_unzip *u, const uint8_t *c) { (void)u; (void)c; return NDZ_ENOTSUP; }
int ndz_unzip_finish(struct ndz_unzip *u, struct ndz_unzip_stats *s) { (void)u; (void)s; return NDZ_ENOTSUP; }
const char *ndz_unzip_errmsg(const struct ndz_unzip *u) { (void)u; return "not supported"; }
void ndz_unzip_free(struct ndz_unzip *u) { (void)u; }
