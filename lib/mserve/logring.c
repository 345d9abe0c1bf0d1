/* The master's recent log lines (logring.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "logring.h"

struct line {
	uint64_t wall_s;
	int level;
	char text[NDZ_LOGRING_TEXT + 1];
};

struct ndz_logring {
	pthread_mutex_t mu;
	struct line l[NDZ_LOGRING_LINES];
	size_t next, n;                /* where the next goes; how many are kept */
};

int ndz_logring_new(struct ndz_logring **out, struct ndz_error *e)
{
	struct ndz_logring *r = calloc(1, sizeof(*r));

	*out = r;
	if (!r)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "log tail: %s", ndz_strerror(NDZ_ENOMEM));
	pthread_mutex_init(&r->mu, NULL);
	return 0;
}

void ndz_logring_free(struct ndz_logring *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void ndz_logring_add(struct ndz_logring *r, int level, uint64_t wall_s, const char *text)
{
	struct line *l;
	size_t k;

	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	l = &r->l[r->next];
	l->wall_s = wall_s;
	l->level = level;
	for (k = 0; text[k] && text[k] != '\n' && k < NDZ_LOGRING_TEXT; k++)
		l->text[k] = (unsigned char)text[k] < 0x20 ? '?' : text[k];
	l->text[k] = 0;
	r->next = (r->next + 1) % NDZ_LOGRING_LINES;
	if (r->n < NDZ_LOGRING_LINES)
		r->n++;
	pthread_mutex_unlock(&r->mu);
}

static const char *level_name(int level)
{
	switch (level) {
	case -1: return "warning";
	case 0: return "error";
	case 1: return "info";
	case 3: return "refused";
	default: return "debug";
	}
}

size_t ndz_logring_json(struct ndz_logring *r, char *buf, size_t cap)
{
	struct ndz_jbuf j;

	ndz_jbuf_init(&j, buf, cap);
	ndz_jbuf_printf(&j, "[");
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < r->n; i++) {
		const struct line *l = &r->l[(r->next + NDZ_LOGRING_LINES - r->n + i) %
					     NDZ_LOGRING_LINES];

		ndz_jbuf_printf(&j, "%s{\"time\":%llu,\"level\":\"%s\",\"text\":", i ? "," : "",
				(unsigned long long)l->wall_s, level_name(l->level));
		ndz_jbuf_string(&j, l->text);
		ndz_jbuf_printf(&j, "}");
	}
	pthread_mutex_unlock(&r->mu);
	ndz_jbuf_printf(&j, "]");
	return j.over ? 0 : j.len;
}
