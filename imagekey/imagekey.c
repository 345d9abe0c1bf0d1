/* imagekey: make keys, sign an existing image, verify an image against its signed manifest. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/err.h"
#include "core/io.h"
#include "trust/seal.h"
#include "trust/verify.h"

static const char usage_text[] =
	"Usage: imagekey generate [-e] -o NAME\n"
	"       imagekey sign -k SECKEY [-m MANIFEST] IMAGE\n"
	"       imagekey verify -k PUBKEY [-m MANIFEST] IMAGE\n"
	"       imagekey show KEYFILE\n"
	"Keys for signed and encrypted images.\n"
	"\n"
	"  generate           a signing key pair: NAME.sec (mode 0600) and NAME.pub;\n"
	"                     with -e an encryption key: NAME.key (mode 0600)\n"
	"  sign               check every chunk of IMAGE ('-' for stdin) and write its\n"
	"                     signed manifest (default IMAGE.manifest); the image\n"
	"                     is not changed\n"
	"  verify             check the manifest's signature and every chunk of IMAGE\n"
	"  show               print a key file's type and id\n"
	"\n"
	"  -o, --output NAME  where generate writes the key files\n"
	"  -e, --encrypt      generate an encryption key instead of a signing pair\n"
	"  -k, --key FILE     the secret key (sign) or public key (verify)\n"
	"  -m, --manifest FILE  the manifest (default IMAGE.manifest; needed for stdin)\n"
	"  -q, --quiet        print errors only\n"
	"  -v, --verbose      say more\n"
	"  -h, --help         show this help and exit\n"
	"  -V, --version      show the version and exit\n"
	"\n"
	"Exit status: 0 success (verify: the image is the one signed), 1 failure,\n"
	"2 bad usage.\n";

static void die_err(const struct ndz_error *e)
{
	cli_die(EXIT_FAIL, "%s", ndz_error_msg(e));
}

static struct ndz_key load_key(const char *path, enum ndz_key_type want)
{
	struct ndz_error e = { 0 };
	struct ndz_key k;

	if (ndz_key_load_as(path, NDZ_KEY_BIT(want), &k, &e) < 0)
		die_err(&e);
	return k;
}

static const char *manifest_name(const char *image, const char *given, char *buf, size_t len)
{
	struct ndz_error e = { 0 };

	if (given)
		return given;
	if (strcmp(image, "-") == 0)
		cli_usage_error("an image from stdin needs -m MANIFEST");
	if (ndz_manifest_path(image, buf, len, &e) < 0)
		cli_usage_error("%s", ndz_error_msg(&e));
	return buf;
}

static int cmd_generate(const char *name, int encrypt)
{
	struct ndz_error e = { 0 };
	struct ndz_key k, pub;
	char path[PATH_MAX], ppath[PATH_MAX], id[17];

	if (!name)
		cli_usage_error("generate: -o NAME is needed");
	if (ndz_key_generate(encrypt ? NDZ_KEY_CRYPT : NDZ_KEY_SIGN_SECRET, &k, &e) < 0)
		die_err(&e);
	if ((size_t)snprintf(path, sizeof(path), "%s.%s", name, encrypt ? "key" : "sec") >=
	    sizeof(path) || (size_t)snprintf(ppath, sizeof(ppath), "%s.pub", name) >= sizeof(ppath))
		cli_usage_error("%s: name too long", name);
	if (ndz_key_save(path, &k, &e) < 0)
		die_err(&e);
	if (!encrypt) {
		if (ndz_key_public(&k, &pub, &e) < 0 || ndz_key_save(ppath, &pub, &e) < 0) {
			unlink(path);
			die_err(&e);
		}
	}
	ndz_key_id_hex(k.id, id);
	ndz_key_wipe(&k);
	if (encrypt)
		cli_info("%s: encryption key %s", path, id);
	else
		cli_info("%s, %s: signing key pair %s", path, ppath, id);
	return EXIT_OK;
}

static int cmd_sign(const char *keyp, const char *image, const char *mpath)
{
	struct ndz_key k = load_key(keyp, NDZ_KEY_SIGN_SECRET);
	struct ndz_error e = { 0 };
	struct ndz_manifest m;
	struct ndz_io *in = cli_open_image(image);
	char buf[PATH_MAX], id[17];
	uint8_t *enc;
	size_t len;
	int rc;

	mpath = manifest_name(image, mpath, buf, sizeof(buf));
	if (ndz_manifest_build(in, &m, &e) < 0)
		die_err(&e);
	rc = ndz_manifest_sign(&m, &k, &enc, &len, &e);
	ndz_key_wipe(&k);
	if (rc < 0) {
		ndz_error_prefix(&e, "%s", image);
		die_err(&e);
	}
	if (ndz_manifest_save(mpath, enc, len, &e) < 0)
		die_err(&e);
	ndz_key_id_hex(m.key_id, id);
	if (cli_verbose)
		cli_info("%s: %u chunks signed with key %s into %s", image, m.chunks, id, mpath);
	free(enc);
	ndz_manifest_release(&m);
	ndz_io_close(in);
	return EXIT_OK;
}

static int cmd_verify(const char *keyp, const char *image, const char *mpath)
{
	struct ndz_key k = load_key(keyp, NDZ_KEY_SIGN_PUBLIC);
	struct ndz_verify_opts vo = { .pub = &k, .name = image, .stored = 1 };
	struct ndz_error e = { 0 };
	struct ndz_verify *v;
	struct ndz_io *in;
	char buf[PATH_MAX];

	mpath = manifest_name(image, mpath, buf, sizeof(buf));
	if (ndz_verify_create(&vo, &v, &e) < 0)
		die_err(&e);
	/* the signature first: nothing of the image is trusted before it */
	if (ndz_verify_load_manifest(v, mpath, &e) < 0)
		die_err(&e);
	in = cli_open_image(image);
	if (ndz_verify_walk(v, in, &e) < 0)
		die_err(&e);
	if (!cli_quiet)
		printf("%s: %u chunks, signature and every chunk good\n", image,
		       ndz_verify_get_manifest(v)->chunks);
	ndz_verify_free(v);
	ndz_io_close(in);
	return EXIT_OK;
}

static int cmd_show(const char *path)
{
	struct ndz_error e = { 0 };
	struct ndz_key k;
	char id[17];

	if (ndz_key_load(path, &k, &e) < 0)
		die_err(&e);
	ndz_key_id_hex(k.id, id);
	printf("%s: %s key %s\n", path, ndz_key_type_name(k.type), id);
	ndz_key_wipe(&k);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "encrypt", no_argument, NULL, 'e' },
		{ "key", required_argument, NULL, 'k' },
		{ "manifest", required_argument, NULL, 'm' },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *key = NULL, *manifest = NULL, *cmd;
	int encrypt = 0, c, nargs;

	cli_init(argv[0]);
	while ((c = getopt_long(argc, argv, "o:ek:m:qvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'e':
			encrypt = 1;
			break;
		case 'k':
			key = optarg;
			break;
		case 'm':
			manifest = optarg;
			break;
		default:
			cli_common_option(c, usage_text);
			break;
		}
	}
	if (optind >= argc)
		cli_usage_error("expected a command: generate, sign, verify or show");
	signal(SIGPIPE, SIG_IGN);
	cmd = argv[optind++];
	nargs = argc - optind;
	if (!strcmp(cmd, "generate")) {
		if (nargs)
			cli_usage_error("generate: unexpected argument '%s'", argv[optind]);
		return cmd_generate(out, encrypt);
	}
	if (!strcmp(cmd, "show")) {
		if (nargs != 1)
			cli_usage_error("show: expected KEYFILE");
		return cmd_show(argv[optind]);
	}
	if (!strcmp(cmd, "sign") || !strcmp(cmd, "verify")) {
		if (nargs != 1)
			cli_usage_error("%s: expected IMAGE", cmd);
		if (!key)
			cli_usage_error("%s: -k KEYFILE is needed", cmd);
		return !strcmp(cmd, "sign") ? cmd_sign(key, argv[optind], manifest) :
		       cmd_verify(key, argv[optind], manifest);
	}
	cli_usage_error("unknown command '%s' (generate, sign, verify, show)", cmd);
}
