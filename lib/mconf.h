/*
 * The master's configuration (doc/mfrisbeed.conf.5): images, who may have them,
 * bandwidth, the multicast address pool and ports, limits. Parsed only here.
 */
#ifndef NDZ_MCONF_H
#define NDZ_MCONF_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct ndz_cidr {
	uint32_t addr, mask;           /* host byte order */
};

struct ndz_mconf_image {
	char *name;                    /* at most NDZ_CTL_NAME_MAX bytes */
	char *path;
	struct ndz_cidr *allow;        /* nallow prefixes; none: nobody may have it */
	size_t nallow;
	uint64_t rate;                 /* bits/s; 0: the default rate */
};

struct ndz_mconf {
	struct ndz_mconf_image *images;
	size_t nimages;
	uint32_t pool_base, pool_size; /* multicast addresses, host order */
	uint16_t port_lo, port_hi;
	unsigned max_sessions;
	uint64_t rate;                 /* default per-image rate, bits/s */
	uint64_t total_rate;           /* 0: no total cap */
	unsigned idle_timeout;         /* seconds, passed to frisbeed -T */
};

/*
 * ndz_mconf_parse - the configuration in text (len bytes; fname names it in
 * messages). "imagedir" lines are read from the filesystem now. Returns 0 and *out
 * (free with ndz_mconf_free), or NDZ_EINVAL / NDZ_ENOMEM with e saying
 * "fname:line: what is wrong" for the first error.
 */
int ndz_mconf_parse(const char *text, size_t len, const char *fname, struct ndz_mconf **out,
		    struct ndz_error *e);

/* ndz_mconf_load - read the file path and parse it as ndz_mconf_parse. */
int ndz_mconf_load(const char *path, struct ndz_mconf **out, struct ndz_error *e);

/* ndz_mconf_free - accepts NULL. */
void ndz_mconf_free(struct ndz_mconf *c);

/* ndz_mconf_find - the image called name, or NULL. */
const struct ndz_mconf_image *ndz_mconf_find(const struct ndz_mconf *c, const char *name);

/* ndz_mconf_allows - 1 when addr (network order) may have im, else 0. */
int ndz_mconf_allows(const struct ndz_mconf_image *im, uint32_t addr);

/* ndz_mconf_allows_any - 1 when some image allows addr (network order). */
int ndz_mconf_allows_any(const struct ndz_mconf *c, uint32_t addr);

/*
 * ndz_parse_rate - "100M", "1G", "8000": bits/s, k/M/G/T powers of 1000.
 * 0 or NDZ_EINVAL (malformed, overflowing, or 0).
 */
int ndz_parse_rate(const char *s, uint64_t *out);

#endif
