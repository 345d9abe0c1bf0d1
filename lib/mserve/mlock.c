/* The master's lock (mlock.h). */
#include <pthread.h>
#include <stdlib.h>

#include "mlock.h"

struct ndz_mlock {
	pthread_mutex_t m;
};

int ndz_mlock_create(struct ndz_mlock **out, struct ndz_error *e)
{
	struct ndz_mlock *l = malloc(sizeof(*l));

	*out = NULL;
	if (!l)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "master's lock: %s", ndz_strerror(NDZ_ENOMEM));
	pthread_mutex_init(&l->m, NULL);
	*out = l;
	return 0;
}

void ndz_mlock_free(struct ndz_mlock *l)
{
	if (!l)
		return;
	pthread_mutex_destroy(&l->m);
	free(l);
}

void ndz_mlock_take(struct ndz_mlock *l)
{
	pthread_mutex_lock(&l->m);
}

void ndz_mlock_give(struct ndz_mlock *l)
{
	pthread_mutex_unlock(&l->m);
}
