/* frisbee -M: ask an image master (mfrisbeed) where the image NAME is being served. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "ctl/ctl.h"
#include "master.h"
#include "mcast/net.h"

void ask_master(const char *spec, const char *name, struct master_answer *a)
{
	static uint8_t buf[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req = { .type = NDZ_CTL_GET };
	struct ndz_ctl_rep rep;
	struct ndz_error e = { 0 };

	if (!ndz_ctl_valid_name(name))
		cli_usage_error("-I: '%s' is not a valid image name (%s)", name, NDZ_CTL_NAME_RULE);
	snprintf(req.name, sizeof(req.name), "%s", name);
	if (ndz_ctl_ask(spec, &req, buf, sizeof(buf), &rep, &e) != 0)
		cli_die(e.code == NDZ_EINVAL ? EXIT_USAGE : EXIT_FAIL, "%s", ndz_error_msg(&e));
	ndz_net_ntoa(rep.group, a->group);
	a->port = rep.port;
	a->server = rep.server;
	memcpy(a->uuid, rep.uuid, 16);
	a->source_bytes = rep.source_bytes;
	if (cli_verbose) {
		char s[16];

		cli_info("master %s: image '%s' (%u chunks) on %s port %u from %s at %.1f Mbit/s",
			 spec, name, rep.chunks, a->group, rep.port, ndz_net_ntoa(rep.server, s),
			 (double)rep.rate_bps / 1e6);
	}
}
