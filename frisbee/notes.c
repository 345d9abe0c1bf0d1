/* frisbee's messages of what its session (lib/mcast/client) tells. */
#include <stdio.h>

#include "frisbee.h"

/* What the session tells, as messages. */
void net_note(void *ctx, const struct ndz_client_note *n)
{
	char a[16];

	(void)ctx;
	switch (n->what) {
	case NDZ_CLIENT_NOTE_JOIN:
		if (cli_verbose > 1)
			cli_info("join sent");
		break;
	case NDZ_CLIENT_NOTE_OTHERS:
		if (cli_verbose > 1)
			cli_info("a server answered, not us; asking to join now");
		break;
	case NDZ_CLIENT_NOTE_TRAFFIC:
		if (cli_verbose > 1)
			cli_info("a transfer is under way; asking to join now");
		break;
	case NDZ_CLIENT_NOTE_IGNORED:
		if (cli_verbose)
			cli_warn("server %s announces an image of %u chunks restoring to %llu "
				 "bytes: %s; waiting for another", ndz_net_ntoa(n->from, a),
				 n->info->chunks, (unsigned long long)n->info->source_bytes,
				 n->why == NDZ_ERANGE ? "more chunks than that many bytes can need" :
				 "more than the target holds");
		break;
	case NDZ_CLIENT_NOTE_JOINED:
		if (cli_verbose)
			cli_info("server %s: %u chunks, image %s", ndz_net_ntoa(n->from, a),
				 n->info->chunks, "joined");
		break;
	case NDZ_CLIENT_NOTE_REPAIR:
		if (cli_verbose > 1)
			cli_info("the server sends repair blocks%s%s",
				 n->count & NDZ_FEAT_WHOLE ? " of stripes and whole chunks" : "",
				 n->count & NDZ_FEAT_RANGE ? ", and of block ranges" : "");
		break;
	case NDZ_CLIENT_NOTE_REQUEST:
		if (cli_verbose <= 2)
			break;
		if (n->repairs)
			cli_info("request repairs of chunk %u", n->chunk);
		else if (n->count)
			cli_info("request %u missing blocks of chunk %u", n->count, n->chunk);
		else
			cli_info("request chunk %u", n->chunk);
		break;
	case NDZ_CLIENT_NOTE_CAPS:
		if (n->ms && n->count > NDZ_PKT_BLOCK_LEN)
			cli_warn("no large datagram for %llu ms though the server sends them: "
				 "a link on the way may drop them; asking for datagrams of %u "
				 "bytes (a 1500-byte MTU's)", (unsigned long long)n->ms, n->count);
		else if (n->ms)
			cli_warn("no block for %llu ms though the server sends datagrams of "
				 "several blocks: a link on the way may drop large datagrams; "
				 "asking for one block a datagram", (unsigned long long)n->ms);
		else if (cli_verbose > 1)
			cli_info("told the server we take datagrams of %u bytes%s", n->count,
				 n->repairs & NDZ_CAPS_SPAN ? ", SPANs too" : "");
		break;
	case NDZ_CLIENT_NOTE_SILENT:
		if (cli_verbose > 1)
			cli_info("server silent for %llu ms; asking again", (unsigned long long)n->ms);
		break;
	}
}

/* The result line (unless -q), and with -v what was dropped. */
void summary(struct client *c, int code, const struct ndz_client_stats *st)
{
	if (code != EXIT_OK) {
		cli_drop_file();
		cli_error("%s", ndz_error_msg(&c->err));
	} else if (!cli_quiet) {
		char rate[64], held[256] = "";

		if (c->seed)
			snprintf(held, sizeof(held), "; %u chunks skipped (held by the target), "
				 "%u patched (%u pieces written, %llu blocks asked for them); "
				 "%llu range repairs, %llu blocks rebuilt from them",
				 st->held, c->pst.chunks, c->pst.pieces_written,
				 (unsigned long long)st->fetch.partial_blocks,
				 (unsigned long long)st->fetch.range_repairs,
				 (unsigned long long)st->fetch.range_decoded);
		fprintf(stderr, "%s: %u chunks in %.2f s (%s), %llu blocks received, "
			"%llu repairs (%llu blocks rebuilt), %llu duplicates, %llu requests sent, "
			"flushed in %.2f s%s\n", cli_progname, c->info.chunks,
			cli_progress_elapsed(&c->prog), cli_progress_rate(&c->prog, rate, sizeof(rate)),
			(unsigned long long)st->fetch.blocks, (unsigned long long)st->fetch.repairs,
			(unsigned long long)st->fetch.decoded, (unsigned long long)st->fetch.dups,
			(unsigned long long)st->requests, c->prog.flush_s, held);
	}
	if (cli_verbose)
		cli_info("dropped: %llu malformed, %llu other version, %llu foreign, %llu no room, "
			 "%llu chunks failed their checksum, %llu forged", (unsigned long long)st->bad,
			 (unsigned long long)st->bad_version, (unsigned long long)st->foreign,
			 (unsigned long long)st->fetch.no_room, (unsigned long long)st->crc_fail,
			 (unsigned long long)st->forged);
	if (cli_verbose && (st->steps_std || st->steps_block))
		cli_info("stepped down: %llu times to datagrams of %u bytes, %llu to one block "
			 "a datagram", (unsigned long long)st->steps_std, NDZ_PKT_STD_PAYLOAD,
			 (unsigned long long)st->steps_block);
	if (!cli_verbose && st->forged && !cli_quiet)
		cli_warn("%llu forged chunks discarded and fetched again",
			 (unsigned long long)st->forged);
}
