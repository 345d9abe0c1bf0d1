/*
 * A fresh signing key pair for the unit tests that sign (test_index, test_job,
 * test_trust, test_verify): a new secret key in sec and its public half in pub,
 * each step asserted to succeed. Include after <cmocka.h>.
 */
#ifndef NDZ_TEST_KEYFIX_H
#define NDZ_TEST_KEYFIX_H

#include "trust/key.h"

static void key_pair(struct ndz_key *sec, struct ndz_key *pub)
{
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, sec, NULL), 0);
	assert_int_equal(ndz_key_public(sec, pub, NULL), 0);
}

#endif
