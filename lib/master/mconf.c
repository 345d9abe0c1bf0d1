/* The master's configuration file: one parser, every error named by file and line. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "ctl/ctl.h"
#include "core/fields.h"
#include "core/image.h"
#include "core/io.h"
#include "mconf.h"
#include "pxe.h"
#include "mcast/net.h"

#define MAX_TOKENS 16               /* "image N P allow L upload L rate R" is 9 */
#define CONF_MAX (1u << 20)

struct parser {
	struct ndz_mconf *c;
	const char *fname;
	unsigned line;
	unsigned upload_line;          /* the first line saying "upload" */
	uint8_t from;                  /* the image line being read: enum ndz_mconf_from */
	unsigned token_line;           /* the line naming the token file ... */
	const char *token_key;         /* ... with this key (token-file or its old name) */
	struct ndz_error *e;
};

static int perr(struct parser *p, const char *what, const char *arg)
{
	return ndz_error_set(p->e, NDZ_EINVAL, 0, "%s:%u: %s%s%s%s", p->fname, p->line, what,
			     arg ? " '" : "", arg ? arg : "", arg ? "'" : "");
}

int ndz_parse_rate(const char *s, uint64_t *out, struct ndz_error *e)
{
	uint64_t v;

	/* the options' rule (frisbeed -W 100m), so that the file means what they mean */
	if (ndz_parse_u64(s, 0, &v, NULL) != 0 || v == 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad rate '%s'", s);
	*out = v;
	return 0;
}

static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return *end || errno || *out < lo || *out > hi ? -1 : 0;
}

/* "a.b.c.d" or "a.b.c.d/len" into host-order address and mask. */
static int parse_cidr(const char *s, struct ndz_cidr *out)
{
	char a[16];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long bits = 32;
	struct in_addr in;

	if (n >= sizeof(a))
		return -1;
	memcpy(a, s, n);
	a[n] = 0;
	if (inet_pton(AF_INET, a, &in) != 1 || (slash && parse_uint(slash + 1, 0, 32, &bits)))
		return -1;
	out->mask = bits ? ~0u << (32 - bits) : 0;
	out->addr = ntohl(in.s_addr) & out->mask;
	return 0;
}

static int valid_name(const char *s)
{
	return ndz_ctl_valid_name(s);
}

/* What an image or directory line says besides its name and path. */
struct opts {
	struct ndz_cidr allow[64], upload[64];
	size_t nallow, nupload;
	uint64_t rate;
};

static int copy_cidrs(struct ndz_cidr **to, const struct ndz_cidr *from, size_t n)
{
	*to = n ? malloc(n * sizeof(*from)) : NULL;
	if (n && !*to)
		return -1;
	if (n)
		memcpy(*to, from, n * sizeof(*from));
	return 0;
}

static int add_image(struct parser *p, const char *name, const char *path,
		     const struct opts *o)
{
	struct ndz_mconf *c = p->c;
	struct ndz_mconf_image *im, *grown;
	const struct ndz_mconf_image *first;

	if (!valid_name(name))
		return perr(p, "bad image name (letters, digits, '.', '_', '-'; at most 64)", name);
	if ((first = ndz_mconf_find(c, name)) != NULL) {
		static const char *const by[] = { "an image line", "a file of the imagedir",
						  "a file of the upload-dir" };

		/* where the first one is, so the admin knows which to change */
		return ndz_error_set(p->e, NDZ_EINVAL, 0, "%s:%u: image defined twice '%s': %s, "
				     "first defined as %s by %s at line %u", p->fname, p->line,
				     name, path, first->path, by[first->from < 3 ? first->from : 0],
				     first->line);
	}
	grown = realloc(c->images, (c->nimages + 1) * sizeof(*grown));
	if (!grown)
		return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
	c->images = grown;
	im = &c->images[c->nimages];
	memset(im, 0, sizeof(*im));
	im->name = strdup(name);
	im->path = strdup(path);
	im->line = p->line;
	im->from = p->from;
	c->nimages++;                  /* freed with the rest, whole or not */
	if (!im->name || !im->path || copy_cidrs(&im->allow, o->allow, o->nallow) ||
	    copy_cidrs(&im->upload, o->upload, o->nupload))
		return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
	im->nallow = o->nallow;
	im->nupload = o->nupload;
	im->rate = o->rate;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Note *path as skipped; takes it over. */
static int skip(struct parser *p, char **path)
{
	struct ndz_mconf *c = p->c;
	char **grown = realloc(c->skipped, (c->nskipped + 1) * sizeof(*grown));

	if (!grown)
		return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
	c->skipped = grown;
	c->skipped[c->nskipped++] = *path;
	*path = NULL;
	return 0;
}

/* Every DIR/NAME.ndz as image NAME, in name order so that errors are stable. */
static int add_dir(struct parser *p, const char *dir, const struct opts *o)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;
	int rc = 0;

	if (!d)
		return ndz_error_set(p->e, NDZ_EINVAL, errno, "%s:%u: imagedir '%s'", p->fname,
				     p->line, dir);
	while (rc == 0 && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char **grown;

		if (l <= 4 || strcmp(de->d_name + l - 4, ".ndz") != 0)
			continue;
		grown = realloc(names, (n + 1) * sizeof(*names));
		if (!grown || !(grown[n] = strdup(de->d_name)))
			rc = ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
		if (grown)
			names = grown;
		if (rc == 0)
			n++;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(names[i]);
		char *path = malloc(strlen(dir) + l + 2);

		if (rc == 0 && !path)
			rc = ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
		if (rc == 0) {
			sprintf(path, "%s/%s", dir, names[i]);
			names[i][l - 4] = 0;
			/* a file someone put there ("Win 10.ndz") must not stop the others */
			if (!valid_name(names[i]))
				rc = skip(p, &path);
			else
				rc = add_image(p, names[i], path, o);
		}
		free(path);
		free(names[i]);
	}
	free(names);
	return rc;
}

/* "a.b.c.d/n,..." onto list (at most 64). */
static int parse_list(struct parser *p, char *arg, struct ndz_cidr *list, size_t *n)
{
	for (char *s = arg, *comma; s; s = comma) {
		comma = strchr(s, ',');
		if (comma)
			*comma++ = 0;
		if (*n == 64)
			return perr(p, "more than 64 prefixes", NULL);
		if (!*s)
			return perr(p, "empty entry in an address list (ADDR[/LEN],ADDR[/LEN],...)",
				    NULL);
		if (parse_cidr(s, &list[*n]) != 0)
			return perr(p, "bad address or prefix (ADDR or ADDR/LEN, e.g. 10.0.0.0/8)",
				    s);
		(*n)++;
	}
	return 0;
}

/*
 * "image NAME PATH [allow CIDR,...] [upload CIDR,...] [rate RATE]", "imagedir DIR
 * [...]" and "upload-dir DIR [...]" (an imagedir that uploads go to). kind: 0, 1, 2.
 */
static int parse_image(struct parser *p, char **tok, int ntok, int kind)
{
	struct opts o;
	struct ndz_mconf *c = p->c;
	int first = kind ? 2 : 3;

	memset(&o, 0, sizeof(o));
	if (ntok < first)
		return perr(p, kind == 2 ? "upload-dir needs a directory" :
			    kind ? "imagedir needs a directory" : "image needs a name and a path",
			    NULL);
	for (int i = first; i < ntok; i += 2) {
		int rc = 0;

		if (i + 1 >= ntok)
			return perr(p, "missing value after", tok[i]);
		if (strcmp(tok[i], "allow") == 0) {
			rc = parse_list(p, tok[i + 1], o.allow, &o.nallow);
		} else if (strcmp(tok[i], "upload") == 0) {
			rc = parse_list(p, tok[i + 1], o.upload, &o.nupload);
		} else if (strcmp(tok[i], "rate") == 0) {
			if (ndz_parse_rate(tok[i + 1], &o.rate, NULL) != 0 || o.rate < 8000)
				return perr(p, "bad rate (bits/s, at least 8k)", tok[i + 1]);
		} else {
			return perr(p, "unknown image option", tok[i]);
		}
		if (rc)
			return rc;
	}
	if (o.nupload && !p->upload_line)
		p->upload_line = p->line;
	if (kind == 2) {
		if (c->upload_dir)
			return perr(p, "upload-dir given twice", NULL);
		if (!(c->upload_dir = strdup(tok[1])) ||
		    copy_cidrs(&c->dir_upload, o.upload, o.nupload))
			return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
		c->ndir_upload = o.nupload;
	}
	p->from = kind == 2 ? NDZ_MCONF_UPLOAD_DIR : kind ? NDZ_MCONF_IMAGEDIR :
		  NDZ_MCONF_IMAGE_LINE;
	if (kind)
		return add_dir(p, tok[1], &o);
	return add_image(p, tok[1], tok[2], &o);
}

/* "http-listen ADDR:PORT": an IPv4 address and a port (0: any free one). */
static int parse_http_listen(struct parser *p, const char *arg)
{
	struct ndz_mconf *c = p->c;
	char a[32], *colon;
	unsigned long v;
	struct in_addr in;

	snprintf(a, sizeof(a), "%s", arg);
	colon = strrchr(a, ':');
	if (strlen(arg) >= sizeof(a) || !colon)
		return perr(p, "bad http-listen (ADDR:PORT)", arg);
	*colon = 0;
	if (inet_pton(AF_INET, a, &in) != 1 || parse_uint(colon + 1, 0, 65535, &v))
		return perr(p, "bad http-listen (ADDR:PORT)", arg);
	if (c->nhttp == NDZ_MCONF_HTTP_MAX)
		return perr(p, "too many http-listen lines (at most 8)", arg);
	c->http[c->nhttp++] = (struct ndz_mconf_listen){ in.s_addr, (uint16_t)v };
	return 0;
}

/* ---- token-file (begin): one admin token for TCP admin requests and HTTP actions ---- */
/*
 * "token-file PATH", or its old name "http-token-file PATH" (an absolute path, as it
 * always had to be): each given once; both may be given only naming the same file.
 */
static int parse_token_file(struct parser *p, const char *k, const char *val)
{
	struct ndz_mconf *c = p->c;
	int old = strcmp(k, "http-token-file") == 0;

	if (old && val[0] != '/')
		return perr(p, "bad http-token-file (an absolute path)", val);
	if (c->token_file && strcmp(p->token_key, k) == 0)
		return ndz_error_set(p->e, NDZ_EINVAL, 0, "%s:%u: %s given twice", p->fname,
				     p->line, k);
	if (c->token_file && strcmp(c->token_file, val) != 0)
		return ndz_error_set(p->e, NDZ_EINVAL, 0, "%s:%u: %s '%s' is not the file %s "
				     "names on line %u ('%s'): one admin token serves HTTP and "
				     "TCP; keep token-file alone (http-token-file is its old name)",
				     p->fname, p->line, k, val, p->token_key, p->token_line,
				     c->token_file);
	if (!c->token_file) {
		if (!(c->token_file = strdup(val)))
			return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
		p->token_line = p->line;
		p->token_key = old ? "http-token-file" : "token-file";
	}
	return 0;
}
/* ---- token-file (end) ---- */

/* The keywords whose value is a string kept as it is (given once), and where it goes. */
static const struct str_key {
	const char *key;
	size_t off;                    /* of the char * in struct ndz_mconf */
} str_keys[] = {
	{ "wake-interface", offsetof(struct ndz_mconf, wake_iface) },
	{ "admin-socket", offsetof(struct ndz_mconf, admin_socket) },
	{ "admin-listen", offsetof(struct ndz_mconf, admin_listen) },
	{ "lab-state", offsetof(struct ndz_mconf, lab_state) },
	{ "pxe-dir", offsetof(struct ndz_mconf, pxe_dir) },   /* network boot (lib/master/pxe) */
	{ "pxe-url", offsetof(struct ndz_mconf, pxe_url) },
	{ "parent", offsetof(struct ndz_mconf, parent) },     /* a site master (doc/SITES.md) */
	{ "site-cache", offsetof(struct ndz_mconf, site_cache) },
	{ "site-key", offsetof(struct ndz_mconf, site_key) },
	{ "site-name", offsetof(struct ndz_mconf, site_name) },
	{ "store", offsetof(struct ndz_mconf, store) },       /* an object store (doc/SITES.md) */
	{ "store-bucket", offsetof(struct ndz_mconf, store_bucket) },
	{ "store-prefix", offsetof(struct ndz_mconf, store_prefix) },
	{ "store-region", offsetof(struct ndz_mconf, store_region) },
	{ "store-credentials", offsetof(struct ndz_mconf, store_credentials) },
};

static char **str_field(struct ndz_mconf *c, const struct str_key *k)
{
	return (char **)(void *)((char *)c + k->off);
}

static int parse_str_key(struct parser *p, const struct str_key *sk, const char *val)
{
	char **str = str_field(p->c, sk);

	if (*str)
		return ndz_error_set(p->e, NDZ_EINVAL, 0, "%s:%u: %s given twice", p->fname,
				     p->line, sk->key);
	if (str == &p->c->pxe_dir && val[0] != '/')
		return perr(p, "bad pxe-dir (an absolute path)", val);
	if (str == &p->c->pxe_url && !ndz_pxe_url_ok(val))
		return perr(p, "bad pxe-url (http://, https:// or tftp://, a host and a path of "
			    "letters, digits and -._~:/@%+=,!*(); at most 512 bytes)", val);
	if (str == &p->c->parent && ndz_ctl_hostport(val, NDZ_CTL_PORT, (char[256]){ 0 }, 256,
						      &(uint16_t){ 0 }, NULL) != 0)
		return perr(p, "bad parent (HOST[:PORT])", val);
	if (str == &p->c->site_name && !ndz_ctl_valid_name(val))
		return perr(p, "bad site-name (" NDZ_CTL_NAME_RULE ")", val);
	if (str == &p->c->site_cache && val[0] != '/')
		return perr(p, "bad site-cache (an absolute path)", val);
	if (str == &p->c->store && !ndz_s3_valid_endpoint(val))
		return perr(p, "bad store (http://HOST[:PORT] or https://HOST[:PORT])", val);
	if (str == &p->c->store_bucket && !ndz_s3_valid_bucket(val))
		return perr(p, "bad store-bucket (3 to 63 of a-z, 0-9, '.', '-')", val);
	if (str == &p->c->store_prefix && !ndz_s3_valid_prefix(val))
		return perr(p, "bad store-prefix (at most 200 of letters, digits, '.', '_', '-', "
			    "'/'; no leading '/', no '//')", val);
	if (str == &p->c->store_credentials && val[0] != '/')
		return perr(p, "bad store-credentials (an absolute path)", val);
	if (!(*str = strdup(val)))
		return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
	return 0;
}

/* The site keys that are no plain string: "site-cache-size BYTES", "pin NAME". */
static int parse_site_key(struct parser *p, const char *k, const char *val)
{
	struct ndz_mconf *c = p->c;
	char **pins;

	if (strcmp(k, "site-allow") == 0) {
		struct ndz_cidr list[64];
		size_t n = 0;
		char v[1024];

		snprintf(v, sizeof(v), "%s", val);
		if (c->site_allow)
			return perr(p, "site-allow given twice", NULL);
		if (parse_list(p, v, list, &n) != 0)
			return NDZ_EINVAL;
		if (copy_cidrs(&c->site_allow, list, n) != 0)
			return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
		c->nsite_allow = n;
		return 0;
	}
	if (strcmp(k, "site-cache-size") == 0) {
		if (ndz_parse_u64(val, 1, &c->site_cache_size, NULL) != 0)
			return perr(p, "bad site-cache-size (bytes, k/M/G/T: powers of 1024)", val);
		return 0;
	}
	if (!ndz_ctl_valid_name(val))
		return perr(p, "bad pin (an image name: " NDZ_CTL_NAME_RULE ")", val);
	if (!(pins = realloc(c->pins, (c->npins + 1) * sizeof(*pins))))
		return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
	c->pins = pins;
	if (!(pins[c->npins] = strdup(val)))
		return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
	c->npins++;
	return 0;
}

int ndz_mconf_pinned(const struct ndz_mconf *c, const char *name)
{
	for (size_t i = 0; i < c->npins; i++)
		if (strcmp(c->pins[i], name) == 0)
			return 1;
	return 0;
}

/* Is line (its comment cut) a pxe-args line? Its value is the rest of the line. */
static const char *pxe_args_value(const char *line)
{
	line += strspn(line, " \t\r");
	if (strncmp(line, "pxe-args", 8) != 0 || (line[8] && !strchr(" \t\r", line[8])))
		return NULL;
	return line + 8;
}

/* "pxe-args WORDS...": the words as they are, blanks between them made single spaces. */
static int parse_pxe_args(struct parser *p, const char *val)
{
	struct ndz_mconf *c = p->c;
	char v[1024];
	size_t n = 0;

	/* no longer than the line (< 1024 bytes) it comes from */
	for (val += strspn(val, " \t\r"); *val; val += strspn(val, " \t\r")) {
		size_t w = strcspn(val, " \t\r");

		if (n)
			v[n++] = ' ';
		memcpy(v + n, val, w);
		n += w;
		val += w;
	}
	v[n] = 0;
	if (!n)
		return perr(p, "missing value after", "pxe-args");
	if (c->pxe_args)
		return ndz_error_set(p->e, NDZ_EINVAL, 0, "%s:%u: pxe-args given twice", p->fname,
				     p->line);
	if (!ndz_pxe_args_ok(v))
		return perr(p, "bad pxe-args (kernel parameters: printable ASCII, at most 1000 "
			    "bytes, without quotes, '\\', '|', '&' or ';')", v);
	if (!(c->pxe_args = strdup(v)))
		return ndz_error_set(p->e, NDZ_ENOMEM, 0, NULL);
	return 0;
}

/* ---- end of the pxe keys ---- */

/* A keyword that takes one value has exactly one: 0, or the error. */
static int one_value(struct parser *p, const char *k, int ntok)
{
	return ntok == 2 ? 0 : perr(p, ntok == 1 ? "missing value after" :
				    "too many values after", k);
}

/* The keywords whose value is a whole number within bounds, and where it goes. */
static const struct num_key {
	const char *key;
	unsigned long lo, hi;
	const char *unit;              /* in the message: "(LO to HI UNIT)" */
	size_t off;                    /* of the unsigned in struct ndz_mconf */
} num_keys[] = {
#define NUM(key, lo, hi, unit, field) { key, lo, hi, unit, offsetof(struct ndz_mconf, field) }
	NUM("max-sessions", 1, 1024, "", max_sessions),
	NUM("idle-timeout", 1, 86400, " seconds", idle_timeout),
	NUM("upload-timeout", 1, 3600, " seconds", upload_timeout),
	NUM("max-uploads", 1, 64, "", max_uploads),
	NUM("request-timeout", 1, 60, " seconds", request_timeout),
	NUM("max-pending", 1, NDZ_ADMIT_MAX, "", max_pending),
	NUM("max-pending-host", 1, NDZ_ADMIT_MAX, "", max_pending_host),
	NUM("host-rate", 1, 100000, " a second", host_rate),
	NUM("host-burst", 1, 100000, "", host_burst),
	NUM("group-window", 0, 3600, " seconds", group_window),
	NUM("node-timeout", 1, 86400, " seconds", node_timeout),
	NUM("lab-host-rate", 1, 100000, " a second", lab_host_rate),
	NUM("lab-host-burst", 1, 100000, "", lab_host_burst),
	NUM("site-report", 1, 3600, " seconds", site_report),
	NUM("site-recheck", 0, 86400, " seconds", site_recheck),
#undef NUM
};

static int parse_num_key(struct parser *p, const struct num_key *n, const char *val)
{
	unsigned long v;
	char what[96];

	if (parse_uint(val, n->lo, n->hi, &v)) {
		snprintf(what, sizeof(what), "bad %s (%lu to %lu%s)", n->key, n->lo, n->hi,
			 n->unit);
		return perr(p, what, val);
	}
	*(unsigned *)(void *)((char *)p->c + n->off) = (unsigned)v;
	return 0;
}

static int parse_line(struct parser *p, char **tok, int ntok)
{
	struct ndz_mconf *c = p->c;
	const char *k = tok[0];
	unsigned long v, w;

	static const char *const keys[] = { "pool", "ports", "rate", "total-rate", "quota",
					    "http-listen", "http-token-file" };
	size_t i;

	if (strcmp(k, "image") == 0 || strcmp(k, "imagedir") == 0)
		return parse_image(p, tok, ntok, k[5] == 'd');
	if (strcmp(k, "upload-dir") == 0)
		return parse_image(p, tok, ntok, 2);
	if ((strcmp(k, "token-file") == 0 || strcmp(k, "http-token-file") == 0) && ntok == 2)
		return parse_token_file(p, k, tok[1]);
	if (strcmp(k, "pxe-local") == 0) {
		if (one_value(p, k, ntok))
			return NDZ_EINVAL;
		if (strcmp(tok[1], "exit") != 0 && strcmp(tok[1], "sanboot") != 0)
			return perr(p, "bad pxe-local (exit or sanboot)", tok[1]);
		c->pxe_local = tok[1][0] == 's' ? NDZ_PXE_SANBOOT : NDZ_PXE_EXIT;
		return 0;
	}
	if (strcmp(k, "token-file") == 0)          /* with a value missing or too many */
		return one_value(p, k, ntok);
	if (strcmp(k, "site-cache-size") == 0 || strcmp(k, "pin") == 0 ||
	    strcmp(k, "site-allow") == 0)
		return one_value(p, k, ntok) ? NDZ_EINVAL : parse_site_key(p, k, tok[1]);
	for (i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++)
		if (strcmp(k, str_keys[i].key) == 0)
			return one_value(p, k, ntok) ? NDZ_EINVAL :
			       parse_str_key(p, &str_keys[i], tok[1]);
	for (i = 0; i < sizeof(num_keys) / sizeof(num_keys[0]); i++)
		if (strcmp(k, num_keys[i].key) == 0)
			return one_value(p, k, ntok) ? NDZ_EINVAL :
			       parse_num_key(p, &num_keys[i], tok[1]);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]) && strcmp(k, keys[i]) != 0; i++)
		;
	if (i == sizeof(keys) / sizeof(keys[0]))
		return perr(p, "unknown keyword", k);
	if (one_value(p, k, ntok))
		return NDZ_EINVAL;
	if (strcmp(k, "pool") == 0) {
		struct ndz_cidr cidr;

		if (parse_cidr(tok[1], &cidr) != 0 || (cidr.addr >> 28) != 0xe ||
		    cidr.mask < 0xffff0000u)
			return perr(p, "bad pool (a multicast prefix, /16 to /32)", tok[1]);
		/* a pool (/16 to /32) holds part of the aligned 224.0.0.0/24 iff its first does */
		if (ndz_net_group_why(cidr.addr))
			return ndz_error_set(p->e, NDZ_EINVAL, 0, "%s:%u: bad pool '%s': it holds "
					     "part of 224.0.0.0/24, the link-local control block "
					     "(all-hosts, routers); choose a prefix in 239.0.0.0/8",
					     p->fname, p->line, tok[1]);
		c->pool_base = cidr.addr;
		c->pool_size = ~cidr.mask + 1;
	} else if (strcmp(k, "ports") == 0) {
		char lo[16], *dash;

		snprintf(lo, sizeof(lo), "%s", tok[1]);
		dash = strchr(lo, '-');
		if (dash)
			*dash++ = 0;
		if (parse_uint(lo, 1, 65535, &v) || parse_uint(dash ? dash : lo, v, 65535, &w))
			return perr(p, "bad port range (LOW-HIGH)", tok[1]);
		c->port_lo = (uint16_t)v;
		c->port_hi = (uint16_t)w;
	} else if (strcmp(k, "rate") == 0) {
		if (ndz_parse_rate(tok[1], &c->rate, NULL) != 0 || c->rate < 8000)
			return perr(p, "bad rate (bits/s, at least 8k)", tok[1]);
	} else if (strcmp(k, "quota") == 0) {
		if (ndz_parse_rate(tok[1], &c->quota, NULL) != 0)
			return perr(p, "bad quota (bytes, k/M/G/T: powers of 1000)", tok[1]);
	} else if (strcmp(k, "http-listen") == 0) {
		return parse_http_listen(p, tok[1]);
	} else {                       /* total-rate */
		if (ndz_parse_rate(tok[1], &c->total_rate, NULL) != 0 || c->total_rate < 8000)
			return perr(p, "bad total-rate (bits/s, at least 8k)", tok[1]);
	}
	return 0;
}

/*
 * "allow a, b" and "allow a ,b" as "allow a,b": a list is one word, but people
 * write blanks after commas. Blanks next to a comma go.
 */
static void join_lists(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (*r == ' ' || *r == '\t') {
			char *n = r;

			while (*n == ' ' || *n == '\t')
				n++;
			if (*n == ',' || (w > s && w[-1] == ',')) {
				r = n - 1;
				continue;
			}
		}
		*w++ = *r;
	}
	*w = 0;
}

int ndz_mconf_parse(const char *text, size_t len, const char *fname, struct ndz_mconf **out,
		    struct ndz_error *e)
{
	struct parser p = { .fname = fname, .e = e };
	struct ndz_mconf *c = calloc(1, sizeof(*c));
	struct ndz_lines lines;
	int rc = 0;

	*out = NULL;
	if (!c)
		return ndz_error_set(e, NDZ_ENOMEM, 0, NULL);
	p.c = c;
	if (!(c->fname = strdup(fname))) {
		free(c);
		return ndz_error_set(e, NDZ_ENOMEM, 0, NULL);
	}
	c->pool_base = 0xefc00100u;    /* 239.192.1.0/24 */
	c->pool_size = 256;
	c->port_lo = 3564;
	c->port_hi = 3564 + 99;
	c->max_sessions = 8;
	c->rate = 100000000;
	c->idle_timeout = 60;
	c->upload_timeout = 30;
	c->max_uploads = 2;
	c->host_rate = 10;
	c->host_burst = 10;
	c->request_timeout = 5;
	c->max_pending = 16;
	c->max_pending_host = 4;
	c->group_window = 5;
	c->node_timeout = 60;
	c->lab_host_rate = 20;
	c->lab_host_burst = 40;
	c->site_report = 2;
	c->site_recheck = 30;
	ndz_lines_init(&lines, fname, text, len);
	while (rc == 0) {
		char buf[1024], *tok[MAX_TOKENS];
		int ntok;

		rc = ndz_lines_next(&lines, buf, sizeof(buf), 1, e);
		p.line = lines.line;
		if (rc <= 0)
			break;
		rc = 0;
		if (pxe_args_value(buf)) {     /* kernel parameters: not split into words */
			rc = parse_pxe_args(&p, pxe_args_value(buf));
			continue;
		}
		join_lists(buf);
		if ((ntok = ndz_fields_split(buf, " \t\r", 0, tok, MAX_TOKENS, NULL)) < 0)
			rc = perr(&p, "too many words", NULL);
		else if (ntok)
			rc = parse_line(&p, tok, ntok);
	}
	if (rc == 0 && p.upload_line && !c->upload_dir) {
		p.line = p.upload_line;
		rc = perr(&p, "'upload' needs an upload-dir line (where uploads are written)", NULL);
	}
	if (rc == 0 && (!c->parent && !c->store) != (!c->site_cache))
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: a site master needs both parent (or "
				   "store) and site-cache", fname);
	if (rc == 0 && (c->store_bucket || c->store_prefix || c->store_region ||
			c->store_credentials) && !c->store)
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: store-... lines need a store line",
				   fname);
	if (rc == 0 && c->store && (!c->store_bucket || !c->store_credentials))
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: a store needs store-bucket and "
				   "store-credentials", fname);
	if (rc == 0 && c->nimages == 0 && !c->upload_dir && !c->parent && !c->store)
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: no images", fname);
	if (rc) {
		ndz_mconf_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int ndz_mconf_load(const char *path, struct ndz_mconf **out, struct ndz_error *e)
{
	struct ndz_io *io;
	char *text;
	size_t size;
	int rc;

	*out = NULL;
	if ((rc = ndz_io_open_file(path, NDZ_IO_READ, &io, e)) < 0)
		return rc;
	size = (size_t)io->size;
	if (io->size > CONF_MAX) {
		ndz_io_close(io);
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: larger than 1 MiB", path);
	}
	text = malloc(size + 1);
	if (!text) {
		ndz_io_close(io);
		return ndz_error_set(e, NDZ_ENOMEM, 0, NULL);
	}
	rc = ndz_io_read_full(io, text, size, 0, NULL, NULL);
	ndz_io_close(io);
	if (rc < 0)
		rc = ndz_error_set(e, rc, 0, "%s: cannot read", path);
	else
		rc = ndz_mconf_parse(text, size, path, out, e);
	free(text);
	return rc;
}

void ndz_mconf_free(struct ndz_mconf *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nimages; i++) {
		free(c->images[i].name);
		free(c->images[i].path);
		free(c->images[i].allow);
		free(c->images[i].upload);
	}
	free(c->images);
	free(c->fname);
	for (size_t i = 0; i < c->nskipped; i++)
		free(c->skipped[i]);
	free(c->skipped);
	free(c->upload_dir);
	free(c->dir_upload);
	for (size_t i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++)
		free(*str_field(c, &str_keys[i]));
	free(c->token_file);
	free(c->pxe_args);
	for (size_t i = 0; i < c->npins; i++)
		free(c->pins[i]);
	free(c->pins);
	free(c->site_allow);
	free(c);
}

const struct ndz_mconf_image *ndz_mconf_find(const struct ndz_mconf *c, const char *name)
{
	for (size_t i = 0; i < c->nimages; i++)
		if (strcmp(c->images[i].name, name) == 0)
			return &c->images[i];
	return NULL;
}

int ndz_mconf_allows(const struct ndz_mconf_image *im, uint32_t addr)
{
	uint32_t a = ntohl(addr);

	for (size_t i = 0; i < im->nallow; i++)
		if ((a & im->allow[i].mask) == im->allow[i].addr)
			return 1;
	return 0;
}

static int in_list(const struct ndz_cidr *l, size_t n, uint32_t addr)
{
	uint32_t a = ntohl(addr);

	for (size_t i = 0; i < n; i++)
		if ((a & l[i].mask) == l[i].addr)
			return 1;
	return 0;
}

int ndz_mconf_upload_target(const struct ndz_mconf *c, const char *name, uint32_t addr,
			    char *path, size_t cap, struct ndz_error *e)
{
	const struct ndz_mconf_image *im = ndz_mconf_find(c, name);
	char a[INET_ADDRSTRLEN];
	int n;

	inet_ntop(AF_INET, &addr, a, sizeof(a));
	if (im) {
		if (!in_list(im->upload, im->nupload, addr))
			return ndz_error_set(e, NDZ_EDENIED, 0, "no upload rule matches %s for "
					     "image '%s'", a, name);
		n = snprintf(path, cap, "%s", im->path);
	} else {
		/* a new image: its file name is its name, so no dot first (hidden, "..") */
		if (!valid_name(name) || name[0] == '.')
			return ndz_error_set(e, NDZ_ENOIMAGE, 0, "'%s' is not a valid image name "
					     "(%s; a new one may not start with '.')", name,
					     NDZ_CTL_NAME_RULE);
		if (!c->upload_dir)
			return ndz_error_set(e, NDZ_ENOIMAGE, 0, "no image '%s', and no upload-dir "
					     "takes new names", name);
		if (!in_list(c->dir_upload, c->ndir_upload, addr))
			return ndz_error_set(e, NDZ_EDENIED, 0, "no upload rule matches %s for "
					     "image '%s'", a, name);
		n = snprintf(path, cap, "%s/%s.ndz", c->upload_dir, name);
	}
	if (n < 0 || (size_t)n >= cap)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "image '%s': its path is too long", name);
	return 0;
}

void ndz_mconf_s3(const struct ndz_mconf *c, struct ndz_s3_conf *out)
{
	*out = (struct ndz_s3_conf){ .endpoint = c->store, .region = c->store_region,
				     .bucket = c->store_bucket, .prefix = c->store_prefix,
				     .credentials = c->store_credentials };
}

int ndz_mconf_site_allows(const struct ndz_mconf *c, uint32_t addr)
{
	return (c->parent || c->store) && in_list(c->site_allow, c->nsite_allow, addr);
}

int ndz_mconf_allows_any(const struct ndz_mconf *c, uint32_t addr)
{
	if (ndz_mconf_site_allows(c, addr))
		return 1;
	for (size_t i = 0; i < c->nimages; i++)
		if (ndz_mconf_allows(&c->images[i], addr))
			return 1;
	return 0;
}

int ndz_mconf_may_connect(const struct ndz_mconf *c, uint32_t addr)
{
	if (ndz_mconf_allows_any(c, addr) || in_list(c->dir_upload, c->ndir_upload, addr))
		return 1;
	for (size_t i = 0; i < c->nimages; i++)
		if (in_list(c->images[i].upload, c->images[i].nupload, addr))
			return 1;
	return 0;
}

int ndz_mconf_skipped(const struct ndz_mconf *c, const char *path)
{
	for (size_t i = 0; c && i < c->nskipped; i++)
		if (strcmp(c->skipped[i], path) == 0)
			return 1;
	return 0;
}

int ndz_mconf_image_check(const struct ndz_mconf_image *im, struct ndz_error *e)
{
	struct ndz_error mine = { 0 };

	if (ndz_image_probe_file(im->path, &mine) >= 0)
		return 0;
	if (im->nupload && mine.code == NDZ_ENOENT)
		return 1;               /* an image its uploaders have yet to send */
	return ndz_error_copy(e, &mine);
}
