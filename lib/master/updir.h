/*
 * The upload directory on disk: how much it holds, the temporary files uploads
 * write (".upload-NAME.XXXXXX" there) and those an earlier master left behind.
 */
#ifndef NDZ_UPDIR_H
#define NDZ_UPDIR_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define NDZ_UPDIR_TMP ".upload-"      /* the temporary files' prefix */

/*
 * ndz_updir_usage - bytes the regular files in dir hold, but for the file at
 * replaced (the one an upload is about to replace; may not exist). 0 when dir
 * cannot be read.
 */
uint64_t ndz_updir_usage(const char *dir, const char *replaced);

/*
 * ndz_updir_clean - remove the temporary files in dir (nobody else writes them: an
 * earlier master was killed mid-upload). removed (may be NULL) is called with ctx
 * and each name removed. dir NULL or unreadable: nothing.
 */
void ndz_updir_clean(const char *dir, void (*removed)(void *ctx, const char *name), void *ctx);

/*
 * ndz_updir_temp - a new temporary file for an upload of name into dir (mode 0644,
 * as imagezip would have made the image), its path in tmp (cap bytes). Returns its
 * descriptor, or NDZ_EIO with e naming the file.
 */
int ndz_updir_temp(const char *dir, const char *name, char *tmp, size_t cap,
		   struct ndz_error *e);

#endif
