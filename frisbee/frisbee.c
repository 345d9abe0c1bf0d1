/*
 * frisbee: receive an image from frisbeed over UDP multicast and restore it.
 * The session (lib/mcast/client) joins, asks for and gathers the chunks; its driver
 * (lib/mcast/cdrive) feeds it what the socket brings and checks each complete chunk
 * on its own thread by our trust policy (policy.c: CRC or signed hash, and decrypts
 * it), handing the good ones to the shared restore pipeline (lib/unzip:
 * decompression threads and one writer thread), the others fetched again.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"
#include "core/target.h"
#include "frisbee.h"
#include "master.h"

#define MS 1000000ull

static const char usage_text[] =
	"Usage: frisbee [options] -m ADDR -p PORT TARGET\n"
	"       frisbee [options] -M HOST[:PORT] -I NAME TARGET\n"
	"Receive an image from frisbeed over UDP multicast and restore it to TARGET.\n\n"
	"  -m, --group ADDR       multicast group\n"
	"  -p, --port PORT        UDP port\n"
	"  -i, --interface IFACE  interface name or address to use\n"
	"  -S, --server ADDR      accept blocks only from this server address\n"
	"  -M, --master HOST[:PORT]  ask this image master (mfrisbeed) where image -I is\n"
	"  -I, --image NAME       the image to ask the master for\n"
	"  -z, --zero             zero-fill the parts of TARGET the image does not cover\n"
	"      --seed             fetch only the chunks TARGET does not hold already (by\n"
	"                         the image's content index from the server)\n"
	"      --verify           after the flush, check every chunk on TARGET\n"
	"      --discard          discard those parts instead (BLKDISCARD; a hole in a file)\n"
	"  -C, --cache MIB        chunk cache size in MiB (default 64)\n"
	"  -R, --request-ahead N  chunks to request ahead (default 2)\n"
	"      --max-datagram BYTES  the largest UDP payload to take (default: the\n"
	"                         interface's MTU less 28); 1044 or less: one block a\n"
	"                         datagram, as frisbee before datagrams of several blocks\n"
	"      --no-gro           read datagrams one by one, not coalesced (UDP GRO)\n"
	"  -T, --timeout SECONDS  give up after this long without the server, or without\n"
	"                         a chunk that checks out (default 30)\n"
	"  -r, --raw              store the image itself in TARGET instead of restoring it\n"
	"      --direct           write past the page cache (O_DIRECT) on a file too\n"
	"                         (default: on a block device only); a file system that\n"
	"                         refuses it is written through the cache\n"
	"      --no-direct        write through the page cache on a block device too\n"
	"  -f, --force            write to TARGET even while it is in use (mounted, swap,\n"
	"                         held, or the file behind a loop device in use)\n"
	"  --no-repair            ask for lost blocks, never for repair blocks\n"
	"  --no-whole-repair      ask for repairs of stripes only, not of whole chunks\n"
	"  --no-range-repair      with --seed, ask for the blocks lost of a piece, never\n"
	"                         for repairs of its block range\n"
	"  -k, --key FILE         a public key: accept only chunks the image's signed\n"
	"                         manifest names (fetched from the server first);\n"
	"                         an encryption key: decrypt (give both if need be)\n"
	"      --manifest FILE    use this signed manifest, not the server's\n"
	"      --orig-key FILE    an original Frisbee V4 image's Blowfish key file\n"
	"      --orig-pubkey FILE an original V4 image's RSA public key (.skey): every\n"
	"                         chunk must carry a signature that verifies under it\n"
	"  -o, --progress         show progress and the time left: a line redrawn on a\n"
	"                         terminal, else a plain line every few seconds\n"
	"      --progress=json    progress as one JSON object a line (see the man page)\n"
	"      --report-fd N      the progress as JSON lines and a result line\n"
	"                         on file descriptor N, for a program running this one\n"
	"  -q, --quiet            no summary line\n"
	"  -v, --verbose          more messages\n"
	"  -h, --help             this help\n"
	"  -V, --version          show the version and exit\n"
	"\nExit status: 0 every chunk checked, written and flushed; 1 failure; 2 bad usage.\n";

/* The driver's sink (lib/mcast/cdrive.h): check a chunk by the trust policy. */
static enum ndz_verdict sink_check(void *ctx, uint8_t *buf, uint32_t chunk,
				   struct ndz_chunk_hdr *h, int *why, int *intact)
{
	return check_chunk(ctx, buf, chunk, h, why, intact);
}

/* Hand a good chunk to the restore pipeline (which may block), or with -r store it. */
static int sink_write(void *ctx, uint32_t chunk, uint8_t *buf, const struct ndz_chunk_hdr *h)
{
	struct client *c = ctx;
	struct ndz_error we = { 0 };
	int r;

	if (!c->raw)
		/* the pipeline's message comes from ndz_unzip_finish */
		return ndz_unzip_put_owned(c->unzip, buf, h, NDZ_UNZIP_CHECKED,
					   ndz_bufpool_release, c->pool);
	r = ndz_io_write_full(c->target, buf, NDZ_CHUNK_SIZE, (uint64_t)chunk * NDZ_CHUNK_SIZE,
			      &we);
	ndz_bufpool_put(c->pool, buf);
	if (r < 0 && !c->werr.code)
		ndz_error_copy(&c->werr, &we);
	return r;
}

static void sink_refetch(void *ctx, uint32_t chunk, enum ndz_verdict how, int why, int partial)
{
	(void)ctx;
	if (cli_verbose)
		cli_warn("chunk %u: %s%s; requesting it again%s", chunk, ndz_strerror(why),
			 how == NDZ_VERDICT_FORGED ? " (forged)" : "",
			 partial == 1 ? " (the blocks in doubt)" :
			 partial == 2 ? " (each block compared with this copy)" : "");
}

/* Patch the target with a chunk received in part (seed.c). */
static int sink_patch(void *ctx, uint32_t chunk, const uint8_t *buf, const uint8_t *blocks,
		      int *why)
{
	return seed_patch(ctx, chunk, buf, blocks, why);
}

/* The progress line follows the chunks. */
static void sink_progress(void *ctx, const struct ndz_client_stats *st)
{
	struct client *c = ctx;

	cli_progress_update(&c->prog, (uint64_t)st->fetch.complete * NDZ_CHUNK_SIZE,
			    st->fetch.complete);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "group", required_argument, NULL, 'm' },
		{ "port", required_argument, NULL, 'p' },
		{ "interface", required_argument, NULL, 'i' },
		{ "server", required_argument, NULL, 'S' },
		{ "master", required_argument, NULL, 'M' },
		{ "image", required_argument, NULL, 'I' },
		{ "zero", no_argument, NULL, 'z' },
		{ "discard", no_argument, NULL, 0x101 },
		{ "cache", required_argument, NULL, 'C' },
		{ "request-ahead", required_argument, NULL, 'R' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "raw", no_argument, NULL, 'r' },
		{ "force", no_argument, NULL, 'f' },
		{ "progress", optional_argument, NULL, 'o' },
		{ "no-repair", no_argument, NULL, 0x100 },
		{ "no-whole-repair", no_argument, NULL, 0x10a },
		{ "no-range-repair", no_argument, NULL, 0x10f },
		{ "key", required_argument, NULL, 'k' },
		{ "manifest", required_argument, NULL, 'F' },
		{ "orig-key", required_argument, NULL, 0x1f0 },
		{ "orig-pubkey", required_argument, NULL, 0x1f3 },
		{ "seed", no_argument, NULL, 0x1f1 }, { "verify", no_argument, NULL, 0x1f2 },
		{ "report-fd", required_argument, NULL, 0x1f4 },
		{ "max-datagram", required_argument, NULL, 0x1f5 },
		{ "no-gro", no_argument, NULL, 0x1f6 },
		{ "direct", no_argument, NULL, 0x1f7 },
		{ "no-direct", no_argument, NULL, 0x1f8 },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	struct ndz_client_stats fst;
	struct client c;
	struct ndz_net_opts no = { .port = 0, .ttl = 5, .loop = 1, .gro = 1 };
	struct ndz_cdrive_opts dopt = {
		.sink = { sink_check, sink_write, sink_refetch, sink_progress, &c, sink_patch },
		.threaded = 1,
	};
	int r;
	int opt, code = EXIT_OK, cache_mib = 64, force = 0, max_dgram = -1;
	unsigned mtu;
	const char *master = NULL, *image = NULL;
	struct master_answer ma;
	uint32_t seed;

	cli_init(argv[0]);
	memset(&c, 0, sizeof(c));
	c.direct = -1;
	c.co.request_ahead = 2;
	c.give_up_s = 30;
	c.co.redelay_ns = 1000 * MS;
	while ((opt = getopt_long(argc, argv, "m:p:i:S:M:I:zC:R:T:rfok:qvhV", lopts, NULL)) != -1) {
		switch (opt) {
		case 'm': no.group = optarg; break;
		case 'p': no.port = (uint16_t)cli_parse_int(optarg, "-p", 1, 65535); break;
		case 'i': no.iface = optarg; break;
		case 'S':
			if (ndz_net_addr(optarg, &c.co.server, NULL) != 0)
				cli_usage_error("-S: bad IPv4 address '%s'", optarg);
			break;
		case 'M': master = optarg; break;
		case 'I': image = optarg; break;
		case 'z': c.zero_fill = 1; break;
		case 0x101: c.discard = 1; break;
		case 'C': cache_mib = cli_parse_int(optarg, "-C", 2, 65536); break;
		case 'R': c.co.request_ahead = (unsigned)cli_parse_int(optarg, "-R", 1, 1024); break;
		case 'T': c.give_up_s = cli_parse_int(optarg, "-T", 1, 1000000); break;
		case 'r': c.raw = 1; break;
		case 'f': force = 1; break;
		case 0x100: c.co.no_repair = 1; break;
		case 0x10a: c.co.no_whole = 1; break;
		case 0x10f: c.co.no_range = 1; break;
		case 'o': c.progress = cli_progress_option(optarg); break;
		case 'k': cli_add_key(optarg, &c.pub, &c.crypt); break;
		case 'F': c.manifest_path = optarg; break;
		case 0x1f0: orig_key_path = optarg; break;
		case 0x1f3: orig_pub_path = optarg; break;
		case 0x1f1: c.seed = 1; break;
		case 0x1f2: c.verify_after = 1; break;
		case 0x1f4: cli_report_open(optarg); break;
		case 0x1f5: max_dgram = cli_parse_int(optarg, "--max-datagram", 0, 65507); break;
		case 0x1f6: no.gro = 0; break;
		case 0x1f7: c.direct = 1; break;
		case 0x1f8: c.direct = 0; break;
		default: cli_common_option(opt, usage_text); break;
		}
	}
	if ((orig_key_path || orig_pub_path) &&
	    ndz_orig_load_keys(orig_key_path, orig_pub_path, &orig_keys, &c.ferr) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.ferr));
	if (!master != !image)
		cli_usage_error("-M HOST and -I NAME go together");
	if (master && (no.group || no.port))
		cli_usage_error("-M replaces -m and -p");
	if (no.group && ndz_net_group(no.group, &(uint32_t){ 0 }, &c.err) != 0)
		cli_usage_error("-m %s", ndz_error_msg(&c.err));
	if (master) {
		if (optind != argc - 1)
			cli_usage_error("expected one TARGET argument");
		ask_master(master, image, &ma);
		no.group = ma.group;
		no.port = ma.port;
		if (!c.co.server)
			c.co.server = ma.server;
		c.co.want_uuid = ma.uuid;
	}
	if (!no.group || !no.port)
		cli_usage_error("-m ADDR and -p PORT are required");
	if (optind != argc - 1)
		cli_usage_error("expected one TARGET argument");
	c.target_path = argv[optind];
	c.co.slots = (size_t)cache_mib;
	if (c.zero_fill && c.discard)
		cli_usage_error("-z and --discard exclude each other");
	if ((c.seed || c.verify_after) && c.raw)
		cli_usage_error("--seed and --verify restore an image: not with -r");
	if (c.manifest_path && c.pub.type == NDZ_KEY_NONE)
		cli_usage_error("--manifest: only with a public --key");
	{
		struct ndz_verify_opts vo = { .pub = &c.pub, .crypt = &c.crypt, .stored = c.raw,
					      .orig = &orig_keys, .name = c.source };

		if (ndz_verify_create(&vo, &c.verify, &c.err) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
		ndz_key_wipe(&c.crypt);
	}
	if (c.manifest_path && ndz_verify_load_manifest(c.verify, c.manifest_path, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
	signal(SIGPIPE, SIG_IGN);
	/* before joining: a target in use is refused without disturbing the session */
	if (!force && ndz_target_check(c.target_path, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s; use --force to write anyway", ndz_error_msg(&c.err));
	if (ndz_net_open(&no, &c.net, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
	/* Linux reports twice what it grants; less than asked means a capped rmem_max */
	if (cli_verbose && ndz_net_rcvbuf(c.net) / 2 < (no.rcvbuf > 0 ? no.rcvbuf : 4 << 20))
		cli_warn("the socket receive buffer is %d KiB, less than asked: expect losses "
			 "at high rates (raise net.core.rmem_max)", ndz_net_rcvbuf(c.net) / 2048);
	/* what we say we take: the interface's MTU less the IPv4 and UDP headers */
	mtu = ndz_net_mtu(c.net);
	c.co.max_payload = max_dgram >= 0 ? (uint32_t)max_dgram : mtu > 28 ? mtu - 28 : 0;
	if (cli_verbose > 1)
		cli_info("interface MTU %u: datagrams of up to %u bytes taken%s", mtu,
			 c.co.max_payload, ndz_net_gro(c.net) ? ", coalesced (UDP GRO)" : "");
	if (getrandom(&c.co.id, sizeof(c.co.id), 0) != sizeof(c.co.id))
		c.co.id = (uint32_t)ndz_now_ns();
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint32_t)ndz_now_ns();
	c.co.seed = seed ^ c.co.id;
	c.co.raw = c.raw;
	c.co.give_up_s = (unsigned)c.give_up_s;
	c.co.group = no.group;
	c.co.port = no.port;
	c.co.target = c.target_path;
	c.co.note = net_note;
	c.co.ctx = &c;
	c.co.room = target_room(&c);
	/* the master said how large the image is: a target too small fails now, not at -T */
	if (master && !c.raw && ma.source_bytes > c.co.room)
		cli_die(EXIT_FAIL, "%s: %s (%llu bytes, image '%s' of master %s needs %llu)",
			c.target_path, ndz_strerror(NDZ_ETOOSMALL), (unsigned long long)c.co.room,
			image, master, (unsigned long long)ma.source_bytes);
	/* the cache's buffers, and those the pipeline decodes from (at most 34) */
	if (ndz_bufpool_create(NDZ_CHUNK_SIZE, (unsigned)c.co.slots + 34, &c.pool, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
	c.co.pool = c.pool;
	dopt.io = ndz_cdrive_net_io(c.net);
	if (ndz_cdrive_create(&c.co, &dopt, &c.drv, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
	c.cl = ndz_cdrive_client(c.drv);
	/* join: ask until a server answers, give up after -T */
	if (ndz_cdrive_run(c.drv, NDZ_CLIENT_JOINING, &c.err) < 0)
		cli_die(EXIT_FAIL, "receive on %s port %u: %s", no.group, no.port,
			strerror(c.err.sys));
	if (ndz_client_state(c.cl) != NDZ_CLIENT_JOINED)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(ndz_client_error(c.cl)));
	c.info = *ndz_client_info(c.cl);
	snprintf(c.source, sizeof(c.source), "%s", ndz_client_source(c.cl));
	check_trust(&c);
	seed_index(&c);
	open_target(&c);
	seed_start(&c);                /* the scan marks held chunks from now on */
	/* progress counts image bytes received, as the summary does */
	cli_progress_init(&c.prog, c.progress, "receiving", "image", "received");
	cli_progress_total(&c.prog, c.info.image_bytes, c.info.chunks);
	if (ndz_cdrive_start(c.drv, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
	r = ndz_cdrive_run(c.drv, NDZ_CLIENT_RECEIVING, &c.err);
	if (r < 0) {
		code = EXIT_FAIL;
	} else if (r == NDZ_CLIENT_FAILED) {
		ndz_error_copy(&c.err, ndz_client_error(c.cl));
		code = EXIT_FAIL;
	}
	if (code == EXIT_OK)
		cli_progress_phase(&c.prog, "flushing");
	/* on failure, what is not written yet stays unwritten */
	ndz_cdrive_stop(c.drv, code != EXIT_OK);
	seed_stop(&c);
	if (!c.err.code)
		ndz_error_copy(&c.err, c.werr.code ? &c.werr : &c.serr);
	/* after a failed put, finishing the pipeline brings out its reason */
	if (code == EXIT_OK && (finish(&c) < 0 || ndz_cdrive_failed(c.drv) ||
				seed_verify(&c) < 0))
		code = EXIT_FAIL;
	if (code == EXIT_OK)
		cli_own_file(NULL);
	ndz_cdrive_leave(c.drv, code != EXIT_OK, NULL);
	ndz_client_get_stats(c.cl, &fst);
	c.prog.held = fst.held;
	cli_progress_end(&c.prog, code == EXIT_OK);
	summary(&c, code, &fst);
	ndz_verify_free(c.verify);
	seed_free(&c);
	ndz_unzip_free(c.unzip);
	ndz_io_close(c.target);
	ndz_cdrive_free(c.drv);
	ndz_bufpool_free(c.pool);
	ndz_net_free(c.net);
	return code;
}
