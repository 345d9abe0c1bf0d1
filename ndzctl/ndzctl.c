/*
 * ndzctl: the lab administrator's command: tell an image master (mfrisbeed) which
 * node reloads or captures what, wake nodes, and see nodes, tasks and results.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "ctl/labcall.h"
#include "node.h"

static const char usage_text[] =
	"Usage: ndzctl [options] COMMAND [ARGUMENTS]\n"
	"Tell an image master (mfrisbeed) which node reloads or captures what, and see\n"
	"its nodes, their tasks and results.\n\n"
	"Commands:\n"
	"  nodes add MAC [NAME|- [GROUP]]    add a node (or rename, regroup it)\n"
	"  nodes [list]                      the nodes, their tasks and last results\n"
	"  nodes remove MAC|NAME             forget a node\n"
	"  images [list]                     the master's images\n"
	"  images info NAME                  chunks, size, signed, index, where from,\n"
	"                                    the sessions serving it\n"
	"  images remove NAME [--force]      delete an imagedir or upload-dir image's\n"
	"                                    files (NAME.ndz, .manifest, .index)\n"
	"  images rename NAME NEWNAME [--force]  rename them (not over an image)\n"
	"  reload NODE|GROUP IMAGE           reload a node or every node of a group\n"
	"  capture NODE NAME                 capture a node's disk as image NAME\n"
	"  cancel NODE|GROUP                 drop the pending tasks\n"
	"  status                            nodes and (with --json) the master's sessions\n"
	"A node's side (the boot environment), with -m HOST[:PORT], the master's control\n"
	"port (UDP 3563 by default):\n"
	"  ask MAC                           what to do: 'reload IMAGE [seed] [zero]\n"
	"                                    [verify]', 'capture NAME' or 'local'\n"
	"  report MAC progress BYTES TOTAL | ok BYTES MS SKIPPED | failed REASON\n"
	"  node MAC DISK                     the whole turn: ask, run the task on DISK\n"
	"                                    (frisbee, or a capture job), report its\n"
	"                                    progress and the result; prints\n"
	"                                    'NDZ-RESULT: ok: ...' or\n"
	"                                    'NDZ-RESULT: failed: REASON'. Exit 0 done,\n"
	"                                    1 failed, 3 no task, 4 no answer to the ask\n"
	"  node - DISK --task reload|capture the same with the task given (nothing asked\n"
	"                                    or reported): --image NAME of -m HOST, or\n"
	"                                    --group ADDR --port N [--server ADDR]\n\n"
	"Options:\n"
	"  -m, --master WHERE       the master's admin socket (default\n"
	"                           /run/mfrisbeed/admin), or tcp:HOST:PORT\n"
	"  -k, --token-file FILE    the admin token, for tcp:HOST:PORT\n"
	"      --seed               reload, node -: keep what the disk already holds\n"
	"                           (and verify); a reload seeds by default when the\n"
	"                           node's disk holds an image of the same lineage\n"
	"      --full               reload: never seed (write every chunk)\n"
	"      --zero               reload, node -: zero what the image does not hold\n"
	"      --verify             reload, node -: read every chunk back\n"
	"      --wake               reload, capture: send Wake-on-LAN to the nodes\n"
	"      --force              images remove, rename: even while a session serves\n"
	"                           it (it finishes with its clients, takes no new\n"
	"                           ones) or (remove) reload tasks name it (cancelled)\n"
	"  -j, --json               nodes list, images list, images info, status: JSON\n"
	"      --interface IF       node: frisbee's interface (-i)\n"
	"      --timeout SECONDS    node: frisbee -T, imagezip --wait (default 30)\n"
	"      --retries N          node: asks and attempts after the first (default 0)\n"
	"      --discard            node: a reload without zero discards the gaps\n"
	"      --opts 'WORDS'       node: more options for frisbee, or imagezip's scan\n"
	"                           and compression options for a capture\n"	"      --task T             node -: reload or capture\n"
	"      --image NAME         node -: the master's image\n"
	"      --group ADDR         node -: reload from frisbeed's multicast group\n"
	"      --port N             node -: ... and port\n"
	"      --server ADDR        node -: ... taking data from that server only\n"
	"  -q, --quiet              only errors\n"
	"  -v, --verbose            say what happens\n"
	"  -h, --help               this help\n"
	"  -V, --version            show the version and exit\n"
	"\nExit status: 0 done; 1 the master refused (no such node, group or image...),\n"
	"or did not answer; 2 bad usage.\n";

struct cmd {
	const char *word, *sub;
	uint8_t op;
	int min, max;                  /* arguments after the command words */
};

static const struct cmd cmds[] = {
	{ "nodes", "add", NDZ_CTL_OP_NODE_ADD, 1, 3 },
	{ "nodes", "list", NDZ_CTL_OP_NODE_LIST, 0, 0 },
	{ "nodes", "remove", NDZ_CTL_OP_NODE_REMOVE, 1, 1 },
	{ "images", "list", NDZ_CTL_OP_IMAGES, 0, 0 },
	{ "images", "info", NDZ_CTL_OP_IMAGE_INFO, 1, 1 },
	{ "images", "remove", NDZ_CTL_OP_IMAGE_REMOVE, 1, 1 },
	{ "images", "rename", NDZ_CTL_OP_IMAGE_RENAME, 2, 2 },
	{ "reload", NULL, NDZ_CTL_OP_RELOAD, 2, 2 },
	{ "capture", NULL, NDZ_CTL_OP_CAPTURE, 2, 2 },
	{ "cancel", NULL, NDZ_CTL_OP_CANCEL, 1, 1 },
	{ "status", NULL, NDZ_CTL_OP_STATUS, 0, 0 },
};

/* ask and report: a node's exchange with the master at spec over UDP */
static int node_side(const char *spec, char **a, int n)
{
	static uint8_t buf[NDZ_CTL_LABREP_MAX];
	struct ndz_ctl_labreq r = { .id = (uint32_t)time(NULL) };
	struct ndz_ctl_labrep rep;
	struct ndz_error e = { 0 };
	const char *kind = n > 2 ? a[2] : "";
	int ask = strcmp(a[0], "ask") == 0;

	if (n < 2 || ndz_labcall_parse_mac(a[1], r.mac, &e) != 0)
		cli_usage_error("%s MAC ...: %s", a[0], n < 2 ? "a MAC is needed" : ndz_error_msg(&e));
	r.type = ask ? NDZ_CTL_ASK : NDZ_CTL_REPORT;
	if (ask && n == 2) {
		;
	} else if (!ask && strcmp(kind, "progress") == 0 && n == 5) {
		r.kind = NDZ_LAB_PROGRESS;
		if (cli_parse_u64(a[3], 0, &r.bytes) || cli_parse_u64(a[4], 0, &r.total))
			cli_usage_error("report progress: BYTES and TOTAL are numbers");
	} else if (!ask && strcmp(kind, "ok") == 0 && n == 6) {
		r.kind = NDZ_LAB_OK;
		if (cli_parse_u64(a[3], 0, &r.bytes) || cli_parse_u64(a[4], 0, &r.ms) ||
		    cli_parse_u64(a[5], 0, &r.skipped))
			cli_usage_error("report ok: BYTES, MS and SKIPPED are numbers");
		r.total = r.bytes;
	} else if (!ask && strcmp(kind, "failed") == 0 && n == 4) {
		r.kind = NDZ_LAB_FAIL;
		snprintf(r.text, sizeof(r.text), "%s", a[3]);
	} else {
		cli_usage_error("%s: bad arguments (see --help)", a[0]);
	}
	for (;;) {
		if (ndz_labcall_node(spec, &r, buf, sizeof(buf), &rep, &e) != 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
		if (rep.status != NDZ_CTL_OK)
			cli_die(EXIT_FAIL, "master %s: %s", spec, ndz_ctl_strstatus(rep.status));
		if (!ask || rep.task != NDZ_LAB_WAIT)
			break;
		if (cli_verbose)
			cli_info("the group starts together: asking again in %u ms", rep.wait_ms);
		nanosleep(&(struct timespec){ rep.wait_ms / 1000, (long)(rep.wait_ms % 1000) * 1000000 },
			  NULL);
	}
	if (ask && (rep.task == NDZ_LAB_RELOAD || rep.task == NDZ_LAB_CAPTURE))
		printf("%s %s%s%s%s\n", ndz_labcall_strtask(rep.task), rep.name,
		       rep.opts & NDZ_LAB_SEED ? " seed" : "", rep.opts & NDZ_LAB_ZERO ? " zero" : "",
		       rep.opts & NDZ_LAB_VERIFY ? " verify" : "");
	else if (ask)
		printf("local\n");
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

/* node MAC DISK, or node - DISK with the task given: checks, then the turn. */
static int node_command(const char *where, int n, char **a, uint8_t flags,
			struct node_opts *no)
{
	int given;

	if (n != 3)
		cli_usage_error("node MAC DISK: %d argument%s, not 2", n - 1, n == 2 ? "" : "s");
	given = strcmp(a[1], "-") == 0;
	if (where && strchr(where, '/'))
		cli_usage_error("node: -m HOST[:PORT], the master's control port, not %s", where);
	if (flags & (NDZ_CTL_FLAG_WAKE | NDZ_CTL_FLAG_FORCE))
		cli_usage_error("--wake and --force do not go with node");
	if (flags & NDZ_LAB_FULL)
		cli_usage_error("--full goes with reload (a node without --seed is full)");
	if (!given) {
		if (!where)
			cli_usage_error("node needs -m HOST[:PORT], the master's control port");
		if (no->task || no->image || no->group || no->port || no->server ||
		    (flags & NDZ_LAB_OPTS))
			cli_usage_error("node MAC: the master gives the task; --task, --image, "
					"--group, --port, --server, --seed, --zero and --verify go "
					"with node - DISK");
		return node_run(where, a[1], a[2], no);
	}
	if (!no->task)
		cli_usage_error("node - DISK: needs --task reload or --task capture");
	if (!no->group != !no->port)
		cli_usage_error("--group and --port go together");
	if (no->group && (where || no->image || strcmp(no->task, "reload") != 0))
		cli_usage_error("--group and --port: a reload from a frisbeed, without -m or "
				"--image");
	if (!no->group && (!where || !no->image))
		cli_usage_error("node - DISK: needs -m HOST[:PORT] and --image NAME (or, for "
				"a reload, --group and --port)");
	if (no->server && !no->group)
		cli_usage_error("--server goes with --group");
	if ((flags & NDZ_LAB_OPTS) && strcmp(no->task, "reload") != 0)
		cli_usage_error("--seed, --zero and --verify go with a reload");
	no->flags = flags & NDZ_LAB_OPTS;
	return node_run(where, a[1], a[2], no);
}

int main(int argc, char **argv)
{
	enum { O_SEED = 256, O_FULL, O_ZERO, O_VERIFY, O_WAKE, O_FORCE, O_IFACE, O_TIMEOUT, O_RETRIES,
	       O_DISCARD, O_OPTS, O_TASK, O_IMAGE, O_GROUP, O_PORT, O_SERVER };
	static const struct option lopts[] = {
		{ "master", required_argument, NULL, 'm' },
		{ "token-file", required_argument, NULL, 'k' },
		{ "seed", no_argument, NULL, O_SEED },
		{ "full", no_argument, NULL, O_FULL },
		{ "zero", no_argument, NULL, O_ZERO },
		{ "verify", no_argument, NULL, O_VERIFY },
		{ "wake", no_argument, NULL, O_WAKE },
		{ "force", no_argument, NULL, O_FORCE },
		{ "json", no_argument, NULL, 'j' },
		{ "interface", required_argument, NULL, O_IFACE },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "retries", required_argument, NULL, O_RETRIES },
		{ "discard", no_argument, NULL, O_DISCARD },
		{ "opts", required_argument, NULL, O_OPTS },
		{ "task", required_argument, NULL, O_TASK },
		{ "image", required_argument, NULL, O_IMAGE },
		{ "group", required_argument, NULL, O_GROUP },
		{ "port", required_argument, NULL, O_PORT },
		{ "server", required_argument, NULL, O_SERVER },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	static uint8_t buf[NDZ_CTL_LABREP_MAX];
	static struct ndz_ctl_labreq req;
	const char *where = NULL, *token = NULL;
	const struct cmd *cmd = NULL;
	struct ndz_ctl_labrep rep;
	struct ndz_error e = { 0 };
	int c, json = 0, nargs;
	uint8_t flags = 0;
	struct node_opts no = { .timeout = "30" };
	int node_opt = 0;
	char *words;

	cli_init(argv[0]);
	while ((c = getopt_long(argc, argv, "m:k:jqvhV", lopts, NULL)) != -1) {
		switch (c) {
		case 'm': where = optarg; break;
		case 'k': token = optarg; break;
		case 'j': json = 1; break;
		case O_SEED: flags |= NDZ_LAB_SEED; break;
		case O_FULL: flags |= NDZ_LAB_FULL; break;
		case O_ZERO: flags |= NDZ_LAB_ZERO; break;
		case O_VERIFY: flags |= NDZ_LAB_VERIFY; break;
		case O_WAKE: flags |= NDZ_CTL_FLAG_WAKE; break;
		case O_FORCE: flags |= NDZ_CTL_FLAG_FORCE; break;
		case O_IFACE: no.iface = optarg; node_opt = 1; break;
		case O_TIMEOUT:
			cli_parse_int(optarg, "--timeout", 1, 1000000);
			no.timeout = optarg;
			node_opt = 1;
			break;
		case O_RETRIES: no.retries = cli_parse_int(optarg, "--retries", 0, 100); node_opt = 1; break;
		case O_DISCARD: no.discard = 1; node_opt = 1; break;
		case O_TASK:
			if (strcmp(optarg, "reload") != 0 && strcmp(optarg, "capture") != 0)
				cli_usage_error("--task: '%s' is not reload or capture", optarg);
			no.task = optarg;
			node_opt = 1;
			break;
		case O_IMAGE: no.image = optarg; node_opt = 1; break;
		case O_GROUP: no.group = optarg; node_opt = 1; break;
		case O_PORT:
			cli_parse_int(optarg, "--port", 1, 65535);
			no.port = optarg;
			node_opt = 1;
			break;
		case O_SERVER: no.server = optarg; node_opt = 1; break;
		case O_OPTS:
			node_opt = 1;
			words = optarg;
			for (char *w = strtok(words, " ,"); w; w = strtok(NULL, " ,")) {
				if (no.nextra == NODE_MAX_EXTRA)
					cli_usage_error("--opts: at most %d words", NODE_MAX_EXTRA);
				no.extra[no.nextra++] = w;
			}
			break;
		default: cli_common_option(c, usage_text); break;
		}
	}
	if (optind >= argc)
		cli_usage_error("a command is needed (nodes, images, reload, capture, cancel, status)");
	if (node_opt && strcmp(argv[optind], "node") != 0)
		cli_usage_error("--interface, --timeout, --retries, --discard, --opts, --task, "
				"--image, --group, --port and --server go with node");
	if (strcmp(argv[optind], "node") == 0)
		return node_command(where, argc - optind, argv + optind, flags, &no);
	if (strcmp(argv[optind], "ask") == 0 || strcmp(argv[optind], "report") == 0) {
		if (!where || strchr(where, '/'))
			cli_usage_error("%s needs -m HOST[:PORT], the master's control port",
					argv[optind]);
		return node_side(where, argv + optind, argc - optind);
	}
	if (!where)
		where = "/run/mfrisbeed/admin";
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]) && !cmd; k++)
		if (strcmp(argv[optind], cmds[k].word) == 0 &&
		    (!cmds[k].sub || (optind + 1 < argc && strcmp(argv[optind + 1], cmds[k].sub) == 0)))
			cmd = &cmds[k];
	/* a command word alone is its list ("nodes": nodes list); one with a subcommand
	 * it does not know gets its subcommands named */
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]) && !cmd; k++) {
		if (!cmds[k].sub || strcmp(argv[optind], cmds[k].word) != 0)
			continue;
		if (optind + 1 < argc)
			cli_usage_error("%s: unknown subcommand '%s' (%s)", cmds[k].word,
					argv[optind + 1], strcmp(cmds[k].word, "nodes") == 0 ?
					"add, list, remove" : "list, info, remove, rename");
		if (strcmp(cmds[k].sub, "list") == 0) {
			cmd = &cmds[k];
			optind--;              /* as if "list" followed */
		}
	}
	if (!cmd)
		cli_usage_error("unknown command '%s%s%s'", argv[optind],
				optind + 1 < argc ? " " : "", optind + 1 < argc ? argv[optind + 1] : "");
	optind += cmd->sub ? 2 : 1;
	nargs = argc - optind;
	if (nargs < cmd->min || nargs > cmd->max)
		cli_usage_error("%s%s%s takes %s%s argument%s, not %d (see --help)", cmd->word,
				cmd->sub ? " " : "", cmd->sub ? cmd->sub : "",
				cmd->min < cmd->max ? "1 to " : "", cmd->max ? (const char *[]){
				"no", "1", "2", "3" }[cmd->max] : "no", cmd->max == 1 ? "" : "s", nargs);
	if ((flags & (NDZ_LAB_OPTS | NDZ_LAB_FULL)) && cmd->op != NDZ_CTL_OP_RELOAD)
		cli_usage_error("--seed, --full, --zero and --verify go with reload");
	if ((flags & NDZ_LAB_SEED) && (flags & NDZ_LAB_FULL))
		cli_usage_error("--seed and --full: a reload seeds or is full, not both");
	if ((flags & NDZ_CTL_FLAG_WAKE) && cmd->op != NDZ_CTL_OP_RELOAD &&
	    cmd->op != NDZ_CTL_OP_CAPTURE)
		cli_usage_error("--wake goes with reload or capture");
	if ((flags & NDZ_CTL_FLAG_FORCE) && cmd->op != NDZ_CTL_OP_IMAGE_REMOVE &&
	    cmd->op != NDZ_CTL_OP_IMAGE_RENAME)
		cli_usage_error("--force goes with images remove or images rename");
	if ((cmd->op == NDZ_CTL_OP_IMAGE_INFO || cmd->op == NDZ_CTL_OP_IMAGE_REMOVE ||
	     cmd->op == NDZ_CTL_OP_IMAGE_RENAME) && !ndz_ctl_valid_name(argv[optind]))
		cli_usage_error("'%s': not an image name (%s)", argv[optind], NDZ_CTL_NAME_RULE);
	if (cmd->op == NDZ_CTL_OP_IMAGE_RENAME && !ndz_ctl_valid_name(argv[optind + 1]))
		cli_usage_error("'%s': not an image name (%s)", argv[optind + 1], NDZ_CTL_NAME_RULE);
	req.type = NDZ_CTL_ADMIN;
	req.id = 1;
	req.op = cmd->op;
	req.flags = (uint8_t)(flags | (json ? 0 : NDZ_CTL_FLAG_TABLE));
	for (int k = 0; k < nargs; k++) {
		const char *a = argv[optind + k];

		if (strlen(a) > NDZ_CTL_NAME_MAX)
			cli_usage_error("'%.40s...': too long (at most %d bytes)", a, NDZ_CTL_NAME_MAX);
		/* "nodes add MAC - GROUP": no name */
		strcpy(req.args[k], cmd->op == NDZ_CTL_OP_NODE_ADD && strcmp(a, "-") == 0 ? "" : a);
	}
	if (strncmp(where, "tcp:", 4) == 0) {
		if (!token)
			cli_usage_error("--master tcp:HOST:PORT needs --token-file");
		if (ndz_ctl_read_token(token, req.token, sizeof(req.token), &e) != 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	}
	if (ndz_labcall(where, &req, buf, sizeof(buf), &rep, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (rep.status != NDZ_CTL_OK)
		cli_die(EXIT_FAIL, "%.*s", (int)rep.text_len, rep.text);
	if (cmd->op == NDZ_CTL_OP_NODE_LIST || cmd->op == NDZ_CTL_OP_IMAGES ||
	    cmd->op == NDZ_CTL_OP_IMAGE_INFO || cmd->op == NDZ_CTL_OP_STATUS)
		printf("%.*s%s", (int)rep.text_len, rep.text, json ? "\n" : "");
	else if (!cli_quiet)
		printf("%.*s\n", (int)rep.text_len, rep.text);
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}
