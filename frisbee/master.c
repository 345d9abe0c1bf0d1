/* frisbee -M: ask an image master (mfrisbeed) where the image NAME is being served. */
#include <stdio.h>

#include "cli/cli.h"
#include "ctl.h"
#include "master.h"
#include "net.h"

void ask_master(const char *spec, const char *name, struct master_answer *a)
{
	static uint8_t buf[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req = { .type = NDZ_CTL_GET };
	struct ndz_ctl_rep rep;
	struct ndz_error e = { 0 };
	char host[256];
	uint16_t port;

	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port) != 0)
		cli_usage_error("-M: bad HOST[:PORT] '%s'", spec);
	if (snprintf(req.name, sizeof(req.name), "%s", name) >= (int)sizeof(req.name) || !*name)
		cli_usage_error("-I: bad image name '%s'", name);
	/* four tries 700 ms apart: about 2.8 s before giving up */
	if (ndz_ctl_query(host, port, &req, 4, 700, buf, sizeof(buf), &rep, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (rep.status != NDZ_CTL_OK)
		cli_die(EXIT_FAIL, "master %s:%u: image '%s': %s", host, port, name,
			ndz_ctl_strstatus(rep.status));
	ndz_net_ntoa(rep.group, a->group);
	a->port = rep.port;
	a->server = rep.server;
	if (cli_verbose) {
		char s[16];

		cli_info("master %s:%u: image '%s' (%u chunks) on %s port %u from %s at %.1f Mbit/s",
			 host, port, name, rep.chunks, a->group, rep.port,
			 ndz_net_ntoa(rep.server, s), (double)rep.rate_bps / 1e6);
	}
}
