/*
 * The trust room whole (key.h, manifest.h, seal.h, verify.h), for the programs that
 * have not yet moved to the one header they need: frisbee and frisbeed. Until they
 * do, it also keeps the four calls they make in their old form, without an
 * ndz_error (the error is then the code alone). New code includes the room's own
 * headers and passes an ndz_error; this file goes when frisbee and frisbeed have
 * moved.
 */
#ifndef NDZ_TRUST_H
#define NDZ_TRUST_H

#include "key.h"
#include "manifest.h"
#include "seal.h"
#include "verify.h"

#define ndz_manifest_check_chunk(m, c, h) (ndz_manifest_check_chunk)(m, c, h, NULL)
#define ndz_chunk_decrypt(k, c, h) (ndz_chunk_decrypt)(k, c, h, NULL)
#define ndz_manifest_path(i, o, l) (ndz_manifest_path)(i, o, l, NULL)
#define ndz_manifest_check_shape(b, l, n) (ndz_manifest_check_shape)(b, l, n, NULL)

#endif
