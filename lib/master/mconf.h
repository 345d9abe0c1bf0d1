/*
 * The master's configuration (doc/mfrisbeed.conf.5): images, who may have them
 * and who may upload them, bandwidth, the multicast address pool and ports, the
 * upload directory and quota, limits. Parsed only here.
 */
#ifndef NDZ_MCONF_H
#define NDZ_MCONF_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "ctl/s3.h"

struct ndz_cidr {
	uint32_t addr, mask;           /* host byte order */
};

/* Where an image comes from (ndz_mconf_image.from). */
enum ndz_mconf_from {
	NDZ_MCONF_IMAGE_LINE = 0,      /* an "image NAME PATH" line: the line defines it */
	NDZ_MCONF_IMAGEDIR = 1,        /* a NAME.ndz in an imagedir: the file defines it */
	NDZ_MCONF_UPLOAD_DIR = 2,      /* a NAME.ndz in the upload-dir (uploaded, or put there) */
};

struct ndz_mconf_image {
	char *name;                    /* at most NDZ_CTL_NAME_MAX bytes */
	char *path;
	unsigned line;                 /* the configuration line that gave it */
	uint8_t from;                  /* enum ndz_mconf_from */
	struct ndz_cidr *allow;        /* nallow prefixes; none: nobody may have it */
	size_t nallow;
	uint64_t rate;                 /* bits/s; 0: the default rate */
	struct ndz_cidr *upload;       /* nupload prefixes that may upload it */
	size_t nupload;
};

#define NDZ_MCONF_HTTP_MAX 8            /* http-listen lines at most */

struct ndz_mconf_listen {
	uint32_t addr;                 /* network order */
	uint16_t port;                 /* host order; 0: any free port */
};

struct ndz_mconf {
	char *fname;                   /* the name the configuration was parsed under */
	struct ndz_mconf_image *images;
	size_t nimages;
	uint32_t pool_base, pool_size; /* multicast addresses, host order */
	uint16_t port_lo, port_hi;
	unsigned max_sessions;
	uint64_t rate;                 /* default per-image rate, bits/s */
	uint64_t total_rate;           /* 0: no total cap */
	unsigned idle_timeout;         /* seconds, passed to frisbeed -T */
	char *upload_dir;              /* NULL: no uploads at all */
	struct ndz_cidr *dir_upload;   /* who may upload new names into upload_dir */
	size_t ndir_upload;
	uint64_t quota;                /* bytes upload_dir may hold; 0: no quota */
	unsigned upload_timeout;       /* seconds an upload may stay quiet */
	unsigned max_uploads;          /* uploads at once */
	unsigned host_rate, host_burst; /* control requests per second per host, burst */
	unsigned request_timeout;      /* seconds a TCP connection may take to its first message */
	unsigned max_pending;          /* TCP connections before their first message, in all */
	unsigned max_pending_host;     /* ... and per host */
	struct ndz_mconf_listen http[NDZ_MCONF_HTTP_MAX]; /* http-listen: where the HTTP */
	size_t nhttp;                  /* endpoint listens (lib/mserve/http); none: no HTTP */
	/* the lab (lib/mserve/labsrv): doc/mfrisbeed.conf.5 */
	unsigned group_window;         /* seconds a group's reload waits for its nodes */
	unsigned node_timeout;         /* seconds a running node may stay silent */
	unsigned lab_host_rate;        /* lab ASK/REPORT datagrams a second per address */
	unsigned lab_host_burst;       /* ... in bursts of this many (lib/master/hostlimit) */
	char *wake_iface;              /* Wake-on-LAN interface; NULL: 255.255.255.255 */
	char *admin_socket;            /* NULL: RUNDIR/admin; "none": no unix socket */
	char *admin_listen;            /* ADDR:PORT for admin requests over TCP; NULL: none */
	char *token_file;              /* token-file (old name http-token-file): the admin
					* token for TCP admin and HTTP actions; NULL: none */
	char *lab_state;               /* the lab's state file; NULL: RUNDIR/lab */
	/* network boot by the master (lib/master/pxe): doc/mfrisbeed.conf.5 */
	char *pxe_dir;                 /* the files served under /pxe/; NULL: none */
	char *pxe_url;                 /* the files' base URL in scripts; NULL: this master's /pxe */
	char *pxe_args;                /* more kernel parameters in scripts; NULL: none */
	int pxe_local;                 /* how nodes boot local: enum ndz_pxe_local */
	/* a site master (doc/SITES.md): images fetched on demand from a parent */
	char *parent;                  /* HOST[:PORT] of the parent master; NULL: not a site */
	char *site_cache;              /* where fetched images are kept (an imagedir's DIR) */
	uint64_t site_cache_size;      /* bytes the cache may hold; 0: no bound */
	char *site_name;               /* how the parent lists this site; NULL: "site" */
	unsigned site_report;          /* seconds between reports when nothing changes */
	unsigned site_recheck;         /* seconds between asking upstream whether a cached
					* image changed (on a GET); 0: every GET */
	char *site_key;                /* a public signing key: fetched images must be signed
					* by it (manifest, index, every chunk); NULL: no key */
	char **pins;                   /* npins image names the cache never evicts */
	size_t npins;
	struct ndz_cidr *site_allow;   /* who may ask for an image not yet at the site */
	size_t nsite_allow;
	/* an S3 object store the images are fetched from and uploads go to (doc/SITES.md) */
	char *store;                   /* its endpoint, http(s)://HOST[:PORT]; NULL: none */
	char *store_bucket, *store_prefix, *store_region, *store_credentials;
	char **skipped;                /* files in an image directory whose name is no image */
	size_t nskipped;               /* name ("Win 10.ndz"): left out, for the caller to tell */
};

/*
 * ndz_mconf_parse - the configuration in text (len bytes; fname names it in
 * messages). "imagedir" lines are read from the filesystem now; a NAME.ndz there
 * whose NAME is no image name is skipped and listed in skipped (its path), not an
 * error. Returns 0 and *out
 * (free with ndz_mconf_free), or NDZ_EINVAL / NDZ_ENOMEM with e saying
 * "fname:line: what is wrong" for the first error.
 */
int ndz_mconf_parse(const char *text, size_t len, const char *fname, struct ndz_mconf **out,
		    struct ndz_error *e);

/* ndz_mconf_load - read the file path and parse it as ndz_mconf_parse. */
int ndz_mconf_load(const char *path, struct ndz_mconf **out, struct ndz_error *e);

/* ndz_mconf_pinned - 1 when a "pin" line names image name, else 0. */
int ndz_mconf_pinned(const struct ndz_mconf *c, const char *name);

/* ndz_mconf_free - accepts NULL. */
void ndz_mconf_free(struct ndz_mconf *c);

/* ndz_mconf_find - the image called name, or NULL. */
const struct ndz_mconf_image *ndz_mconf_find(const struct ndz_mconf *c, const char *name);

/* ndz_mconf_allows - 1 when addr (network order) may have im, else 0. */
int ndz_mconf_allows(const struct ndz_mconf_image *im, uint32_t addr);

/*
 * ndz_mconf_s3 - c's store lines as the object store's client takes them (out's strings
 * point into c; out->endpoint NULL when there is no store).
 */
void ndz_mconf_s3(const struct ndz_mconf *c, struct ndz_s3_conf *out);

/* ndz_mconf_site_allows - 1 when a site-allow line lets addr ask for images not here yet. */
int ndz_mconf_site_allows(const struct ndz_mconf *c, uint32_t addr);

/* ndz_mconf_allows_any - 1 when some image (or a site-allow line) allows addr. */
int ndz_mconf_allows_any(const struct ndz_mconf *c, uint32_t addr);

/*
 * ndz_mconf_may_connect - 1 when addr (network order) may talk to the master at all:
 * some image allows it, or some upload list (an image's, the upload-dir's) names it.
 */
int ndz_mconf_may_connect(const struct ndz_mconf *c, uint32_t addr);

/*
 * ndz_mconf_skipped - 1 when c skipped the file path (an image directory's file
 * whose name is no image name), else 0. c may be NULL.
 */
int ndz_mconf_skipped(const struct ndz_mconf *c, const char *path);

/*
 * ndz_mconf_upload_target - where an upload of name from addr (network order)
 * goes: 0 with the final path in path (cap bytes); NDZ_ENOIMAGE (no such image and
 * no upload-dir, or a name an image cannot have), NDZ_EDENIED, or NDZ_ENOTSUP (the
 * path does not fit), with e saying why in words for the uploader. A configured
 * image's upload list decides; a new name goes to upload_dir/NAME.ndz when the
 * upload-dir line's list allows.
 */
int ndz_mconf_upload_target(const struct ndz_mconf *c, const char *name, uint32_t addr,
			    char *path, size_t cap, struct ndz_error *e);

/*
 * ndz_parse_rate - "100M", "1g", "8000": bits/s, by ndz_parse_u64's rule (k/m/g/t in
 * either case, powers of 1000), the one frisbeed -W follows.
 * 0 or NDZ_EINVAL (malformed, overflowing, or 0) with e (may be NULL) saying
 * "bad rate 'S'".
 */
int ndz_parse_rate(const char *s, uint64_t *out, struct ndz_error *e);

/*
 * ndz_mconf_image_check - can im be served (mfrisbeed --check)? 0: its file is an
 * image; 1: not there yet, but uploaders may send it; a negative code with e
 * naming the file: it cannot be served.
 */
int ndz_mconf_image_check(const struct ndz_mconf_image *im, struct ndz_error *e);

#endif
