/* Unit tests for lib/proto: every packet type round-trips; every field is checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/le.h"
#include "mcast/proto.h"

static uint8_t data[1024];

static struct ndz_pkt make(int type)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = (uint8_t)type;
	p.client_id = 0x11223344;
	p.tag = 0x55667788;
	switch (type) {
	case NDZ_PKT_JOIN_REPLY:
		for (int i = 0; i < 16; i++)
			p.info.uuid[i] = (uint8_t)(i * 7 + 1);
		p.tag = ndz_image_tag(p.info.uuid);
		p.info.chunks = 3;
		p.info.block_size = 1024;
		p.info.blocks_per_chunk = 1024;
		p.info.image_bytes = 3ull << 20;
		p.info.source_bytes = 123456789;
		p.info.rate_bps = 100000000;
		p.info.idle_timeout = 1800;
		break;
	case NDZ_PKT_LEAVE:
		p.leave.elapsed_ms = 4321;
		p.leave.status = 1;
		p.leave.blocks_received = 1ull << 40;
		p.leave.duplicates = 5;
		p.leave.requests_sent = 6;
		p.leave.bytes_written = 7;
		p.leave.chunks_done = 8;
		break;
	case NDZ_PKT_BLOCK:
		p.chunk = 0xfffffffe;
		p.block = 1023;
		p.data = data;
		break;
	case NDZ_PKT_REQUEST:
		p.chunk = 9;
		p.block = 1000;
		p.count = 24;
		break;
	case NDZ_PKT_PREQUEST:
		p.chunk = 10;
		ndz_bit_set(p.bitmap, 0);
		ndz_bit_set(p.bitmap, 1023);
		break;
	case NDZ_PKT_FEATURES:
		p.features = NDZ_FEAT_REPAIR | 0x80000000u;    /* unknown bits pass */
		break;
	case NDZ_PKT_REPAIR:
		p.chunk = 77;
		p.stripe = 7;
		p.index = 126;
		p.data = data;
		break;
	case NDZ_PKT_RREQUEST:
		p.chunk = 78;
		p.need[0] = 1;
		p.need[7] = 128;
		p.need[NDZ_FEC_WHOLE] = 255;
		break;
	case NDZ_PKT_PROGRESS:
		p.progress.chunks_done = 0x0102;
		p.progress.chunks_total = 0x0304;
		p.progress.bytes_written = 0x0102030405060708ull;
		p.progress.elapsed_ms = 0x0a0b0c0d;
		break;
	}
	return p;
}

static const int types[] = { NDZ_PKT_JOIN, NDZ_PKT_JOIN_REPLY, NDZ_PKT_LEAVE,
			     NDZ_PKT_BLOCK, NDZ_PKT_REQUEST, NDZ_PKT_PREQUEST,
			     NDZ_PKT_FEATURES, NDZ_PKT_REPAIR, NDZ_PKT_RREQUEST,
			     NDZ_PKT_PROGRESS };
static const size_t lens[] = { NDZ_PKT_JOIN_LEN, NDZ_PKT_JOIN_REPLY_LEN, NDZ_PKT_LEAVE_LEN,
			       NDZ_PKT_BLOCK_LEN, NDZ_PKT_REQUEST_LEN, NDZ_PKT_PREQUEST_LEN,
			       NDZ_PKT_FEATURES_LEN, NDZ_PKT_REPAIR_LEN, NDZ_PKT_RREQUEST_LEN,
			       NDZ_PKT_PROGRESS_LEN };

static void test_roundtrip(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 1024; i++)
		data[i] = (uint8_t)(i * 31);
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		struct ndz_pkt p = make(types[t]), q;
		uint8_t buf[NDZ_PKT_MAX + 1], buf2[NDZ_PKT_MAX];	/* +1: the one-byte-too-long case */
		int len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);

		assert_int_equal(len, (int)lens[t]);
		assert_true(len <= 1472);       /* one datagram in a 1500-byte MTU */
		assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
		assert_int_equal(q.type, p.type);
		if (p.type == NDZ_PKT_BLOCK) {
			assert_memory_equal(q.data, data, 1024);
			assert_int_equal(q.chunk, p.chunk);
			assert_int_equal(q.block, p.block);
		}
		if (p.type == NDZ_PKT_JOIN_REPLY)
			assert_memory_equal(&q.info, &p.info, sizeof(p.info));
		if (p.type == NDZ_PKT_LEAVE)
			assert_memory_equal(&q.leave, &p.leave, sizeof(p.leave));
		if (p.type == NDZ_PKT_PREQUEST)
			assert_memory_equal(q.bitmap, p.bitmap, sizeof(p.bitmap));
		if (p.type == NDZ_PKT_FEATURES)
			assert_int_equal(q.features, p.features);
		if (p.type == NDZ_PKT_REPAIR) {
			assert_memory_equal(q.data, data, 1024);
			assert_int_equal(q.chunk, p.chunk);
			assert_int_equal(q.stripe, p.stripe);
			assert_int_equal(q.index, p.index);
		}
		if (p.type == NDZ_PKT_PROGRESS) {
			assert_int_equal(q.client_id, p.client_id);
			assert_int_equal(q.tag, p.tag);
			assert_memory_equal(&q.progress, &p.progress, sizeof(p.progress));
		}
		if (p.type == NDZ_PKT_RREQUEST) {
			assert_int_equal(q.chunk, p.chunk);
			assert_memory_equal(q.need, p.need, sizeof(p.need));
		}
		/* re-encoding the decoded packet gives the same bytes */
		assert_int_equal(ndz_pkt_encode(&q, buf2, sizeof(buf2), NULL), len);
		assert_memory_equal(buf, buf2, (size_t)len);
		/* one byte more or less is malformed */
		assert_int_equal(ndz_pkt_decode(buf, (size_t)len - 1, &q, NULL), NDZ_EPROTO);
		buf[len] = 0;
		assert_int_equal(ndz_pkt_decode(buf, (size_t)len + 1, &q, NULL), NDZ_EPROTO);
		/* too small a buffer is refused */
		assert_int_equal(ndz_pkt_encode(&p, buf, (size_t)len - 1, NULL), NDZ_EINVAL);
	}
}

/*
 * BLOCKS (a run of blocks of a chunk) and CAPS (what a client takes): their bytes at
 * their places, little-endian; the length follows the count; every bound refused.
 */
static void test_blocks_caps(void **state)
{
	static uint8_t run[8 * 1024], buf[NDZ_PKT_WIRE_MAX + 1], buf2[NDZ_PKT_WIRE_MAX];
	struct ndz_pkt p, q;
	int len;

	(void)state;
	for (unsigned i = 0; i < sizeof(run); i++)
		run[i] = (uint8_t)(i * 13 + 5);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_BLOCKS;
	p.tag = 0x55667788;
	p.chunk = 0x01020304;
	p.block = 1016;
	p.count = 8;
	p.data = run;
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	assert_int_equal(len, NDZ_PKT_BLOCKS_LEN(8));
	assert_int_equal(len, 8212);
	assert_true(len + 28 <= 9000);          /* one datagram in a 9000-byte MTU */
	assert_memory_equal(buf, "NDZP\x01\x0c\x00\x00", 8);
	assert_memory_equal(buf + 8, "\x88\x77\x66\x55\x04\x03\x02\x01\xf8\x03\x08\x00", 12);
	assert_memory_equal(buf + 20, run, sizeof(run));
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	assert_int_equal(q.type, NDZ_PKT_BLOCKS);
	assert_int_equal(q.chunk, p.chunk);
	assert_int_equal(q.block, 1016);
	assert_int_equal(q.count, 8);
	assert_ptr_equal(q.data, buf + 20);
	assert_int_equal(ndz_pkt_encode(&q, buf2, sizeof(buf2), NULL), len);
	assert_memory_equal(buf, buf2, (size_t)len);
	/* a block more or less than the count says, or a count past the chunk or 8 */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len - 1, &q, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len - 1024, &q, NULL), NDZ_EPROTO);
	buf[len] = 0;
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len + 1, &q, NULL), NDZ_EPROTO);
	buf[16] = 0xf9;                         /* 1017 + 8 > 1024 */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	buf[16] = 0xf8;
	buf[18] = 9;                            /* 9 blocks: more than a BLOCKS holds */
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_BLOCKS_LEN(9), &q, NULL), NDZ_EPROTO);
	buf[18] = 0;
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_BLOCKS_HDR, &q, NULL), NDZ_EPROTO);
	p.count = 9;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.count = 2;
	assert_int_equal(ndz_pkt_encode(&p, buf, NDZ_PKT_BLOCKS_LEN(2) - 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_PKT_BLOCKS_LEN(2));

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_CAPS;
	p.client_id = 0x11223344;
	p.tag = 0x55667788;
	p.max_payload = 8972;
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	assert_int_equal(len, NDZ_PKT_CAPS_LEN);
	assert_memory_equal(buf, "NDZP\x01\x0b\x00\x00\x44\x33\x22\x11\x88\x77\x66\x55"
			    "\x0c\x23\x00\x00\x00\x00\x00\x00", 24);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	assert_int_equal(q.max_payload, 8972);
	assert_int_equal(q.client_id, p.client_id);
	buf[20] = 1;                            /* flags: takes SPAN */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	assert_int_equal(q.caps_flags, NDZ_CAPS_SPAN);
	buf[20] = 3;                            /* and REPAIRS */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	assert_int_equal(q.caps_flags, NDZ_CAPS_SPAN | NDZ_CAPS_REPAIRS);
	buf[20] = 4;                            /* a flag this version does not know */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	buf[20] = 0;
	buf[23] = 0x80;
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	p.caps_flags = NDZ_CAPS_SPAN;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_PKT_CAPS_LEN);
	assert_int_equal(buf[20], 1);
	p.caps_flags = 4;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.caps_flags = 0;
	p.max_payload = NDZ_PKT_BLOCK_LEN - 1;  /* less than a BLOCK: nothing could be sent */
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
}

/*
 * SPAN: tag, chunk, byte offset, then the bytes (the datagram's length says how
 * many); offset and length in 32-byte granules, within the chunk, not empty; the
 * head alone is what the gathering sender sends before the chunk's bytes.
 */
static void test_span(void **state)
{
	static uint8_t run[NDZ_PKT_SPAN_MAX], buf[NDZ_PKT_WIRE_MAX + 64], buf2[NDZ_PKT_WIRE_MAX];
	uint8_t head[NDZ_PKT_DATA_AT];
	struct ndz_pkt p, q;
	int len;

	(void)state;
	for (unsigned i = 0; i < sizeof(run); i++)
		run[i] = (uint8_t)(i * 7 + 3);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_SPAN;
	p.tag = 0x55667788;
	p.chunk = 0x01020304;
	p.offset = 1440;
	p.length = 1440;
	p.data = run;
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	assert_int_equal(len, 1460);            /* a full datagram at MTU 1500 */
	assert_true(len + 28 <= 1500);
	assert_memory_equal(buf, "NDZP\x01\x0d\x00\x00", 8);
	assert_memory_equal(buf + 8, "\x88\x77\x66\x55\x04\x03\x02\x01\xa0\x05\x00\x00", 12);
	assert_memory_equal(buf + 20, run, 1440);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	assert_int_equal(q.type, NDZ_PKT_SPAN);
	assert_int_equal(q.tag, p.tag);
	assert_int_equal(q.chunk, p.chunk);
	assert_int_equal(q.offset, 1440);
	assert_int_equal(q.length, 1440);
	assert_ptr_equal(q.data, buf + 20);
	assert_int_equal(ndz_pkt_encode(&q, buf2, sizeof(buf2), NULL), len);
	assert_memory_equal(buf, buf2, (size_t)len);
	assert_int_equal(ndz_pkt_encode_head(&p, head, sizeof(head), NULL), NDZ_PKT_DATA_AT);
	assert_memory_equal(head, buf, NDZ_PKT_DATA_AT);
	/* shorter by a granule: the last span of a run */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len - 32, &q, NULL), 0);
	assert_int_equal(q.length, 1408);
	/* at 9000: 8928 bytes, and the largest, up to the chunk's end */
	p.length = 8928;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), 8948);
	p.offset = NDZ_CHUNK_SIZE - NDZ_PKT_SPAN_MAX;
	p.length = NDZ_PKT_SPAN_MAX;
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	assert_int_equal(len, NDZ_PKT_WIRE_MAX);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	/* refused: past the chunk's end, longer than the most, empty, not in granules */
	put_le32(buf + 16, NDZ_CHUNK_SIZE - NDZ_PKT_SPAN_MAX + 32);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	put_le32(buf + 16, 0xffffffe0u);        /* (offset + length wraps) */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	put_le32(buf + 16, 0);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	buf[len] = 0;
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len + 32, &q, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_SPAN_HDR, &q, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_SPAN_HDR + 1024 + 1, &q, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_SPAN_HDR + 1024 + 16, &q, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_SPAN_HDR - 1, &q, NULL), NDZ_EPROTO);
	put_le32(buf + 16, 1040);               /* not a granule's start */
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_SPAN_HDR + 1024, &q, NULL), NDZ_EPROTO);
	put_le32(buf + 16, 1056);
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_SPAN_HDR + 1024, &q, NULL), 0);
	buf[6] = 1;                             /* flags of the common header */
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_SPAN_HDR + 1024, &q, NULL), NDZ_EPROTO);
	/* and encode refuses the same */
	p.offset = 16;
	p.length = 1024;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.offset = 0;
	p.length = 0;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.length = 1000;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.length = NDZ_PKT_SPAN_MAX + 32;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.offset = NDZ_CHUNK_SIZE - 1024;
	p.length = 2048;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.length = 1024;
	assert_int_equal(ndz_pkt_encode(&p, buf, NDZ_PKT_SPAN_LEN(1024) - 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_PKT_SPAN_LEN(1024));
}

/*
 * REPAIRS: tag, chunk, set, first index, count, a reserved byte, then count repairs;
 * the length follows the count; a count of 0, above 8, or past the set's repairs,
 * a set above 8, the reserved byte set: refused.
 */
static void test_repairs(void **state)
{
	static uint8_t run[8 * 1024], buf[NDZ_PKT_WIRE_MAX + 1], buf2[NDZ_PKT_WIRE_MAX];
	struct ndz_pkt p, q;
	int len;

	(void)state;
	for (unsigned i = 0; i < sizeof(run); i++)
		run[i] = (uint8_t)(i * 11 + 1);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REPAIRS;
	p.tag = 0x55667788;
	p.chunk = 0x01020304;
	p.stripe = 3;
	p.index = 120;
	p.nrep = 7;                             /* 120-126: the stripe's last */
	p.data = run;
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	assert_int_equal(len, NDZ_PKT_REPAIRS_LEN(7));
	assert_memory_equal(buf, "NDZP\x01\x0e\x00\x00", 8);
	assert_memory_equal(buf + 8, "\x88\x77\x66\x55\x04\x03\x02\x01\x03\x78\x07\x00", 12);
	assert_memory_equal(buf + 20, run, 7 * 1024);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	assert_int_equal(q.type, NDZ_PKT_REPAIRS);
	assert_int_equal(q.stripe, 3);
	assert_int_equal(q.index, 120);
	assert_int_equal(q.nrep, 7);
	assert_ptr_equal(q.data, buf + 20);
	assert_int_equal(ndz_pkt_encode(&q, buf2, sizeof(buf2), NULL), len);
	assert_memory_equal(buf, buf2, (size_t)len);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len - 1024, &q, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len - 1, &q, NULL), NDZ_EPROTO);
	buf[17] = 121;                          /* 121 + 7 > 127 */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	buf[17] = 120;
	buf[19] = 1;                            /* reserved */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	buf[19] = 0;
	buf[16] = 9;                            /* no such set */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), NDZ_EPROTO);
	buf[16] = 8;                            /* the whole chunk's: 255 of them */
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	buf[18] = 0;
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_REPAIRS_HDR, &q, NULL), NDZ_EPROTO);
	buf[18] = 9;
	assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_REPAIRS_LEN(9), &q, NULL), NDZ_EPROTO);
	p.nrep = 0;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.nrep = 9;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	p.nrep = 8;                             /* 120 + 8 > 127 */
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
}

static void test_layout(void **state)
{
	struct ndz_pkt p = make(NDZ_PKT_REQUEST);
	uint8_t b[64];

	(void)state;
	assert_int_equal(ndz_pkt_encode(&p, b, sizeof(b), NULL), 24);
	assert_memory_equal(b, "NDZP\x01\x05\x00\x00", 8);
	assert_memory_equal(b + 8, "\x44\x33\x22\x11\x88\x77\x66\x55\x09\x00\x00\x00\xe8\x03\x18\x00", 16);
	p = make(NDZ_PKT_RREQUEST);
	assert_int_equal(ndz_pkt_encode(&p, b, sizeof(b), NULL), 32);
	assert_memory_equal(b, "NDZP\x01\x09\x00\x00", 8);
	assert_memory_equal(b + 8, "\x44\x33\x22\x11\x88\x77\x66\x55\x4e\x00\x00\x00"
			    "\x01\x00\x00\x00\x00\x00\x00\x80\xff\x00\x00\x00", 24);
	p = make(NDZ_PKT_FEATURES);
	assert_int_equal(ndz_pkt_encode(&p, b, sizeof(b), NULL), 16);
	assert_memory_equal(b, "NDZP\x01\x07\x00\x00\x88\x77\x66\x55\x01\x00\x00\x80", 16);
	/* PROGRESS: client id, tag, chunks done, chunks total, bytes written, elapsed ms */
	p = make(NDZ_PKT_PROGRESS);
	assert_int_equal(ndz_pkt_encode(&p, b, sizeof(b), NULL), 40);
	assert_memory_equal(b, "NDZP\x01\x0a\x00\x00", 8);
	assert_memory_equal(b + 8, "\x44\x33\x22\x11\x88\x77\x66\x55\x02\x01\x00\x00"
			    "\x04\x03\x00\x00\x08\x07\x06\x05\x04\x03\x02\x01"
			    "\x0d\x0c\x0b\x0a\x00\x00\x00\x00", 32);
}

static void expect_bad(int type, size_t off, uint8_t val, int code)
{
	struct ndz_pkt p = make(type), q;
	uint8_t buf[NDZ_PKT_MAX];
	int len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);

	assert_true(len > 0);
	buf[off] = val;
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), code);
}

static void test_validation(void **state)
{
	(void)state;
	expect_bad(NDZ_PKT_JOIN, 0, 'X', NDZ_EPROTO);               /* magic */
	expect_bad(NDZ_PKT_JOIN, 4, 2, NDZ_EPROTOVER);              /* version */
	expect_bad(NDZ_PKT_JOIN, 5, 0, NDZ_EPROTO);                 /* type 0 */
	expect_bad(NDZ_PKT_JOIN, 5, 11, NDZ_EPROTO);                /* unknown type */
	expect_bad(NDZ_PKT_JOIN, 5, 10, NDZ_EPROTO);                /* PROGRESS's length */
	expect_bad(NDZ_PKT_PROGRESS, 17, 0x04, NDZ_EPROTO);         /* done > total */
	expect_bad(NDZ_PKT_PROGRESS, 36, 1, NDZ_EPROTO);            /* reserved */
	expect_bad(NDZ_PKT_PROGRESS, 39, 1, NDZ_EPROTO);            /* reserved */
	expect_bad(NDZ_PKT_JOIN, 6, 1, NDZ_EPROTO);                 /* flags */
	expect_bad(NDZ_PKT_JOIN, 12, 1, NDZ_EPROTO);                /* reserved */
	expect_bad(NDZ_PKT_JOIN_REPLY, 12, 0, NDZ_EPROTO);          /* tag not from uuid */
	expect_bad(NDZ_PKT_JOIN_REPLY, 32, 0, NDZ_EPROTO);          /* chunks vs bytes */
	expect_bad(NDZ_PKT_JOIN_REPLY, 37, 0x08, NDZ_EPROTO);       /* block size 2048 */
	expect_bad(NDZ_PKT_JOIN_REPLY, 41, 0x02, NDZ_EPROTO);       /* blocks per chunk */
	expect_bad(NDZ_PKT_JOIN_REPLY, 75, 1, NDZ_EPROTO);          /* reserved */
	expect_bad(NDZ_PKT_LEAVE, 20, 2, NDZ_EPROTO);               /* status */
	expect_bad(NDZ_PKT_LEAVE, 63, 1, NDZ_EPROTO);               /* reserved */
	expect_bad(NDZ_PKT_BLOCK, 17, 0x04, NDZ_EPROTO);            /* block 1024+ */
	expect_bad(NDZ_PKT_BLOCK, 18, 1, NDZ_EPROTO);               /* reserved */
	expect_bad(NDZ_PKT_REQUEST, 22, 0, NDZ_EPROTO);             /* count 0 */
	expect_bad(NDZ_PKT_REQUEST, 22, 25, NDZ_EPROTO);            /* past the chunk */
	expect_bad(NDZ_PKT_REQUEST, 21, 4, NDZ_EPROTO);             /* first block */
	expect_bad(NDZ_PKT_PREQUEST, 20, 1, NDZ_EPROTO);            /* reserved */
	expect_bad(NDZ_PKT_REPAIR, 16, 9, NDZ_EPROTO);              /* set 9 */
	expect_bad(NDZ_PKT_REPAIR, 17, 127, NDZ_EPROTO);            /* stripe repair index 127 */
	expect_bad(NDZ_PKT_REPAIR, 19, 1, NDZ_EPROTO);              /* reserved */
	expect_bad(NDZ_PKT_RREQUEST, 27, 129, NDZ_EPROTO);          /* more than a stripe */
	expect_bad(NDZ_PKT_RREQUEST, 31, 1, NDZ_EPROTO);            /* reserved */
	expect_bad(NDZ_PKT_RREQUEST, 29, 1, NDZ_EPROTO);            /* reserved */
	{
		/* set 8, the whole chunk: indexes 0-254 */
		struct ndz_pkt p = make(NDZ_PKT_REPAIR), q;
		uint8_t buf[NDZ_PKT_MAX];

		p.stripe = NDZ_FEC_WHOLE;
		p.index = 254;
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), (int)NDZ_PKT_REPAIR_LEN);
		assert_int_equal(buf[16], 8);
		assert_int_equal(buf[17], 254);
		assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_REPAIR_LEN, &q, NULL), 0);
		assert_int_equal(q.stripe, NDZ_FEC_WHOLE);
		assert_int_equal(q.index, 254);
		buf[17] = 255;
		assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_REPAIR_LEN, &q, NULL), NDZ_EPROTO);
		/* an RREQUEST for whole-chunk repairs only */
		p = make(NDZ_PKT_RREQUEST);
		memset(p.need, 0, sizeof(p.need));
		p.need[NDZ_FEC_WHOLE] = 3;
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), (int)NDZ_PKT_RREQUEST_LEN);
		assert_int_equal(buf[28], 3);
		assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_RREQUEST_LEN, &q, NULL), 0);
		assert_int_equal(q.need[NDZ_FEC_WHOLE], 3);
		assert_int_equal(q.need[0] | q.need[7], 0);
	}
	{
		struct ndz_pkt p = make(NDZ_PKT_RREQUEST), q;
		uint8_t buf[NDZ_PKT_MAX];

		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), (int)NDZ_PKT_RREQUEST_LEN);
		memset(buf + 20, 0, 9);                          /* asks for nothing */
		assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_RREQUEST_LEN, &q, NULL), NDZ_EPROTO);
		memset(p.need, 0, sizeof(p.need));
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
		p = make(NDZ_PKT_REPAIR);
		p.data = NULL;
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	}
	{
		struct ndz_pkt p = make(NDZ_PKT_PREQUEST), q;
		uint8_t buf[NDZ_PKT_MAX];

		memset(p.bitmap, 0, sizeof(p.bitmap));
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
		p = make(NDZ_PKT_PREQUEST);
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), (int)NDZ_PKT_PREQUEST_LEN);
		memset(buf + 24, 0, NDZ_BITMAP_BYTES);           /* empty bitmap */
		assert_int_equal(ndz_pkt_decode(buf, NDZ_PKT_PREQUEST_LEN, &q, NULL), NDZ_EPROTO);
		assert_int_equal(ndz_pkt_decode(buf, 0, &q, NULL), NDZ_EPROTO);
		assert_int_equal(ndz_pkt_decode(buf, 7, &q, NULL), NDZ_EPROTO);
	}
	{
		struct ndz_pkt p = make(NDZ_PKT_BLOCK);
		uint8_t buf[NDZ_PKT_MAX];

		p.data = NULL;
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
		p.type = 99;
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	}
}

/* A packet with data encoded as its head, then its data where it lies: the same bytes. */
static void test_head(void **state)
{
	static uint8_t big[NDZ_PKT_BLOCKS_MAX * 1024];
	static const int kinds[] = { NDZ_PKT_BLOCK, NDZ_PKT_REPAIR, NDZ_PKT_BLOCKS };
	uint8_t whole[NDZ_PKT_WIRE_MAX], head[NDZ_PKT_DATA_AT];
	struct ndz_error e = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13 + 5);
	for (size_t t = 0; t < sizeof(kinds) / sizeof(kinds[0]); t++) {
		struct ndz_pkt p = make(kinds[t]);
		size_t dlen;
		int len;

		if (kinds[t] == NDZ_PKT_BLOCKS) {
			p.chunk = 4;
			p.block = 1016;
			p.count = 8;
		}
		p.data = big;
		dlen = kinds[t] == NDZ_PKT_BLOCKS ? (size_t)p.count * 1024 : 1024;
		len = ndz_pkt_encode(&p, whole, sizeof(whole), NULL);
		assert_int_equal(len, NDZ_PKT_DATA_AT + dlen);
		assert_int_equal(ndz_pkt_encode_head(&p, head, sizeof(head), NULL), NDZ_PKT_DATA_AT);
		assert_memory_equal(head, whole, NDZ_PKT_DATA_AT);
		assert_memory_equal(whole + NDZ_PKT_DATA_AT, big, dlen);
		/* too small a room, a field out of range: refused as by ndz_pkt_encode */
		assert_int_equal(ndz_pkt_encode_head(&p, head, NDZ_PKT_DATA_AT - 1, &e), NDZ_EINVAL);
		assert_int_equal(e.code, NDZ_EINVAL);
		p.block = 1024;
		p.stripe = NDZ_FEC_SETS;
		assert_int_equal(ndz_pkt_encode_head(&p, head, sizeof(head), NULL), NDZ_EINVAL);
	}
	/* a packet without data has no head of its own */
	{
		struct ndz_pkt p = make(NDZ_PKT_REQUEST);

		assert_int_equal(ndz_pkt_encode_head(&p, head, sizeof(head), NULL), NDZ_EINVAL);
	}
}

static void test_bits(void **state)
{
	uint8_t bm[NDZ_BITMAP_BYTES];

	(void)state;
	memset(bm, 0, sizeof(bm));
	assert_int_equal(ndz_bit_count(bm), 0);
	ndz_bit_set(bm, 0);
	ndz_bit_set(bm, 9);
	ndz_bit_set(bm, 1023);
	assert_int_equal(bm[0], 1);
	assert_int_equal(bm[1], 2);
	assert_int_equal(bm[127], 0x80);
	assert_int_equal(ndz_bit_count(bm), 3);
	assert_true(ndz_bit_test(bm, 9));
	ndz_bit_clear(bm, 9);
	assert_false(ndz_bit_test(bm, 9));
	assert_int_equal(ndz_bit_count(bm), 2);
}

/*
 * RANGE_RREQUEST and RANGE_REPAIR (doc/PROTOCOL.md, "Range repairs"): their bytes, a
 * round trip, the head of a RANGE_REPAIR before its data, and every forged field
 * refused: a range past the chunk, count 0, no repairs or more than 32 or than the
 * range's blocks, an index past 254, a reserved byte set, a wrong length.
 */
static void test_range(void **state)
{
	static uint8_t blk[1024];
	struct ndz_pkt p, q;
	uint8_t buf[NDZ_PKT_MAX + 1], head[NDZ_PKT_HEAD_MAX];
	int len;

	(void)state;
	for (size_t i = 0; i < sizeof(blk); i++)
		blk[i] = (uint8_t)(i * 7 + 1);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_RANGE_RREQUEST;
	p.client_id = 0x11223344;
	p.tag = 0x55667788;
	p.chunk = 0x0102;
	p.block = 0x0304;
	p.count = 0x00f0;
	p.wanted = 9;
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	assert_int_equal(len, 28);
	assert_memory_equal(buf, "NDZP\x01\x0f\x00\x00\x44\x33\x22\x11\x88\x77\x66\x55"
			    "\x02\x01\x00\x00\x04\x03\xf0\x00\x09\x00\x00\x00", 28);
	assert_int_equal(ndz_pkt_decode(buf, 28, &q, NULL), 0);
	assert_int_equal(q.type, NDZ_PKT_RANGE_RREQUEST);
	assert_int_equal(q.client_id, p.client_id);
	assert_int_equal(q.tag, p.tag);
	assert_int_equal(q.chunk, p.chunk);
	assert_int_equal(q.block, p.block);
	assert_int_equal(q.count, p.count);
	assert_int_equal(q.wanted, 9);
	assert_int_equal(ndz_pkt_decode(buf, 27, &q, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_pkt_decode(buf, 29, &q, NULL), NDZ_EPROTO);
	{
		/* forged: each field out of range, one at a time */
		static const struct { unsigned at, val; } bad[] = {
			{ 21, 0x04 },  /* first 1028 */
			{ 22, 0 },     /* count 0 */
			{ 23, 0x04 },  /* past the chunk: 772 + 0x4f0 */
			{ 24, 0 },     /* no repairs */
			{ 24, 33 },    /* more than NDZ_FEC_ASK_MAX */
			{ 24, 255 },   /* a huge count */
			{ 25, 1 }, { 27, 1 }, /* reserved */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			uint8_t b2[28];

			memcpy(b2, buf, 28);
			b2[bad[i].at] = (uint8_t)bad[i].val;
			assert_int_equal(ndz_pkt_decode(b2, 28, &q, NULL), NDZ_EPROTO);
		}
		p.count = 4;
		p.wanted = 5;          /* more repairs than the range's blocks */
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
		p.count = 1024 - p.block;
		p.wanted = 32;         /* the most, to the chunk's end */
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), 28);
		assert_int_equal(ndz_pkt_decode(buf, 28, &q, NULL), 0);
		p.count++;
		assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
	}

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_RANGE_REPAIR;
	p.tag = 0x55667788;
	p.chunk = 7;
	p.block = 1000;
	p.count = 24;
	p.index = 254;
	p.data = blk;
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	assert_int_equal(len, NDZ_PKT_RANGE_REPAIR_LEN);
	assert_int_equal(len, 1048);
	assert_memory_equal(buf + 5, "\x10\x00\x00\x88\x77\x66\x55\x07\x00\x00\x00"
			    "\xe8\x03\x18\x00\xfe\x00\x00\x00", 19);
	assert_memory_equal(buf + 24, blk, 1024);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len, &q, NULL), 0);
	assert_int_equal(q.block, 1000);
	assert_int_equal(q.count, 24);
	assert_int_equal(q.index, 254);
	assert_ptr_equal(q.data, buf + 24);
	assert_int_equal(ndz_pkt_encode_head(&p, head, sizeof(head), NULL), 24);
	assert_memory_equal(head, buf, 24);
	assert_int_equal(ndz_pkt_encode_head(&p, head, 23, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_pkt_decode(buf, (size_t)len - 1, &q, NULL), NDZ_EPROTO);
	{
		static const struct { unsigned at, val; } bad[] = {
			{ 20, 255 },   /* index 255 */
			{ 18, 25 },    /* past the chunk */
			{ 18, 0 },     /* count 0 */
			{ 17, 0x04 },  /* first 1256 */
			{ 21, 1 }, { 23, 1 }, /* reserved */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			uint8_t b2[NDZ_PKT_RANGE_REPAIR_LEN];

			memcpy(b2, buf, sizeof(b2));
			b2[bad[i].at] = (uint8_t)bad[i].val;
			assert_int_equal(ndz_pkt_decode(b2, sizeof(b2), &q, NULL), NDZ_EPROTO);
		}
	}
	p.data = NULL;
	assert_int_equal(ndz_pkt_encode(&p, buf, sizeof(buf), NULL), NDZ_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_blocks_caps),
		cmocka_unit_test(test_span),
		cmocka_unit_test(test_repairs),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_bits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
