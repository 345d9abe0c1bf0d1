/*
 * imagekey: make keys, sign an existing image, verify an image against its signed
 * manifest, make an image's content index, check a disk against it.
 */
#include <errno.h>
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
#include "codec/seed.h"
#include "core/image.h"
#include "trust/index.h"
#include "trust/seal.h"
#include "trust/verify.h"

static const char usage_text[] =
	"Usage: imagekey generate [-e] -o NAME\n"
	"       imagekey sign -k SECKEY [-m MANIFEST] IMAGE\n"
	"       imagekey verify -k PUBKEY [-m MANIFEST] IMAGE\n"
	"       imagekey index [-k SECKEY] [-x INDEX] IMAGE\n"
	"       imagekey verify --target DEV [-k PUBKEY] [-x INDEX] [-z] IMAGE\n"
	"       imagekey show KEYFILE\n"
	"Keys for signed and encrypted images.\n"
	"\n"
	"  generate           a signing key pair: NAME.sec (mode 0600) and NAME.pub;\n"
	"                     with -e an encryption key: NAME.key (mode 0600)\n"
	"  sign               check every chunk of IMAGE ('-' for stdin) and write its\n"
	"                     signed manifest (default IMAGE.manifest); the image\n"
	"                     is not changed; its content index too when there is\n"
	"                     one (made again from the image, then signed)\n"
	"  verify             check the manifest's signature and every chunk of IMAGE\n"
	"  index              make IMAGE's content index (default IMAGE.index) from\n"
	"                     its chunks, without changing it; signed with -k\n"
	"  verify --target    does DEV hold IMAGE? Read DEV where each chunk writes and\n"
	"                     compare with the content index; nothing is written.\n"
	"                     With -k the index must be signed by that key\n"
	"  show               print a key file's type and id\n"
	"\n"
	"  -o, --output NAME  where generate writes the key files\n"
	"  -e, --encrypt      generate an encryption key instead of a signing pair\n"
	"  -k, --key FILE     the secret key (sign) or public key (verify)\n"
	"  -m, --manifest FILE  the manifest (default IMAGE.manifest; needed for stdin)\n"
	"  -x, --index FILE   the content index (default IMAGE.index)\n"
	"  -t, --target DEV   verify: the disk, partition or file to check\n"
	"  -z, --zero         verify --target: the gaps between the regions must read\n"
	"                     as zero too (a target restored with imageunzip -z)\n"
	"  -q, --quiet        print errors only\n"
	"  -v, --verbose      say more\n"
	"  -h, --help         show this help and exit\n"
	"  -V, --version      show the version and exit\n"
	"\n"
	"Exit status: 0 success (verify: the image is the one signed; verify --target:\n"
	"DEV holds the image), 1 failure (verify --target: DEV does not hold it, the\n"
	"chunks that differ counted), 2 bad usage.\n";

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

static const char *index_name(const char *image, const char *given, char *buf, size_t len)
{
	struct ndz_error e = { 0 };

	if (given)
		return given;
	if (strcmp(image, "-") == 0)
		cli_usage_error("an image from stdin needs -x INDEX");
	if (ndz_index_path(image, buf, len, &e) < 0)
		cli_usage_error("%s", ndz_error_msg(&e));
	return buf;
}

/* Build IMAGE's index from its chunks and write it, signed with k when not NULL. */
static void write_index(const char *image, const char *ipath, const struct ndz_key *k)
{
	struct ndz_error e = { 0 };
	struct ndz_io *in = cli_open_image(image);
	struct ndz_index ix;
	uint8_t *enc = NULL;
	size_t len = 0;
	char id[17];

	if (ndz_index_build(in, image, &ix, &e) < 0 ||
	    ndz_index_encode(&ix, k, &enc, &len, &e) < 0 ||
	    ndz_index_save(ipath, enc, len, &e) < 0) {
		ndz_index_release(&ix);
		die_err(&e);
	}
	ndz_key_id_hex(ix.key_id, id);
	if (cli_verbose)
		cli_info("%s: content index of %u chunks into %s%s%s", image, ix.chunks, ipath,
			 k ? ", signed with key " : "", k ? id : "");
	free(enc);
	ndz_index_release(&ix);
	ndz_io_close(in);
}

static int cmd_index(const char *keyp, const char *image, const char *ipath)
{
	struct ndz_key k;
	char buf[PATH_MAX];

	ipath = index_name(image, ipath, buf, sizeof(buf));
	if (keyp)
		k = load_key(keyp, NDZ_KEY_SIGN_SECRET);
	write_index(image, ipath, keyp ? &k : NULL);
	if (keyp)
		ndz_key_wipe(&k);
	return EXIT_OK;
}

/*
 * verify --target: the index (signed by pub when given) against the image's first
 * header, then every chunk looked for on the target. Nothing is written.
 */
static int cmd_check_target(const char *keyp, const char *image, const char *ipath,
			    const char *target, int zero)
{
	struct ndz_error e = { 0 };
	struct ndz_image_reader *r;
	struct ndz_seed_opts so = { 0, zero, 1 };
	struct ndz_key k;
	struct ndz_index ix;
	struct ndz_io *in, *dev;
	struct ndz_seed_verdict v;
	char buf[PATH_MAX];
	int rc;

	ipath = index_name(image, ipath, buf, sizeof(buf));
	if (keyp)
		k = load_key(keyp, NDZ_KEY_SIGN_PUBLIC);
	if (ndz_index_load(ipath, keyp ? &k : NULL, &ix, &e) < 0)
		die_err(&e);
	in = cli_open_image(image);
	if (ndz_image_reader_open(in, &r, &e) < 0)
		die_err(&e);
	if (ndz_index_match(&ix, ndz_image_reader_first(r)->uuid,
			    ndz_image_reader_first(r)->source_bytes,
			    ndz_image_reader_chunks(r), &e) < 0) {
		ndz_error_prefix(&e, "%s", ipath);
		die_err(&e);
	}
	ndz_image_reader_free(r);
	ndz_io_close(in);
	if (ndz_io_open_file(target, NDZ_IO_READ, &dev, &e) < 0)
		die_err(&e);
	rc = ndz_seed_holds(dev, &ix, &so, &v, &e);
	if (rc < 0 && rc != NDZ_EVERIFY)
		die_err(&e);
	if (rc < 0)
		cli_error("%s", ndz_error_msg(&e));
	else if (!cli_quiet)
		printf("%s holds %s: %u chunks, every one as the %s index says\n", target, image,
		       v.chunks, keyp ? "signed" : "unsigned");
	ndz_io_close(dev);
	ndz_index_release(&ix);
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}

static int cmd_sign(const char *keyp, const char *image, const char *mpath, const char *ipath)
{
	struct ndz_key k = load_key(keyp, NDZ_KEY_SIGN_SECRET);
	struct ndz_error e = { 0 };
	struct ndz_manifest m;
	struct ndz_io *in = cli_open_image(image);
	char buf[PATH_MAX], id[17];
	uint8_t *enc;
	size_t len;
	int rc, encrypted;

	mpath = manifest_name(image, mpath, buf, sizeof(buf));
	if (ndz_manifest_build(in, &m, &e) < 0)
		die_err(&e);
	rc = ndz_manifest_sign(&m, &k, &enc, &len, &e);
	if (rc < 0) {
		ndz_key_wipe(&k);
		ndz_error_prefix(&e, "%s", image);
		die_err(&e);
	}
	encrypted = !!(m.flags & NDZ_MANIFEST_ENCRYPTED);
	if (ndz_manifest_save(mpath, enc, len, &e) < 0)
		die_err(&e);
	ndz_key_id_hex(m.key_id, id);
	if (cli_verbose)
		cli_info("%s: %u chunks signed with key %s into %s", image, m.chunks, id, mpath);
	free(enc);
	ndz_manifest_release(&m);
	ndz_io_close(in);
	/*
	 * The content index, when there is one (or -x names one): made again from the
	 * image rather than trusted as it is, then signed. An encrypted image's index
	 * cannot be made here: it is left as it is, unsigned.
	 */
	{
		char ibuf[PATH_MAX];
		int have;

		if (!ipath && strcmp(image, "-") != 0 &&
		    ndz_index_path(image, ibuf, sizeof(ibuf), NULL) == 0 &&
		    (access(ibuf, F_OK) == 0 || errno != ENOENT))
			ipath = ibuf;
		have = ipath != NULL;
		if (have && strcmp(image, "-") == 0)
			cli_warn("%s: the content index of an image from stdin is not signed",
				 ipath);
		else if (have && encrypted)
			cli_warn("%s: an encrypted image's content index is made by imagezip: "
				 "not signed", ipath);
		else if (have)
			write_index(image, ipath, &k);
	}
	ndz_key_wipe(&k);
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
		{ "index", required_argument, NULL, 'x' },
		{ "target", required_argument, NULL, 't' },
		{ "zero", no_argument, NULL, 'z' },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *key = NULL, *manifest = NULL, *cmd, *index = NULL;
	const char *target = NULL;
	int encrypt = 0, zero = 0, c, nargs;

	cli_init(argv[0]);
	while ((c = getopt_long(argc, argv, "o:ek:m:x:t:zqvhV", longopts, NULL)) != -1) {
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
		case 'x':
			index = optarg;
			break;
		case 't':
			target = optarg;
			break;
		case 'z':
			zero = 1;
			break;
		default:
			cli_common_option(c, usage_text);
			break;
		}
	}
	if (optind >= argc)
		cli_usage_error("expected a command: generate, sign, verify, index or show");
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
	if ((target || zero) && strcmp(cmd, "verify") != 0)
		cli_usage_error("%s: --target and -z are for verify", cmd);
	if (zero && !target)
		cli_usage_error("verify: -z only with --target");
	if (!strcmp(cmd, "index")) {
		if (nargs != 1)
			cli_usage_error("index: expected IMAGE");
		if (manifest)
			cli_usage_error("index: -m is for sign and verify");
		return cmd_index(key, argv[optind], index);
	}
	if (!strcmp(cmd, "verify") && target) {
		if (nargs != 1)
			cli_usage_error("verify: expected IMAGE");
		if (manifest)
			cli_usage_error("verify --target: -m is not used (the index is, -x)");
		if (strcmp(argv[optind], "-") == 0)
			cli_usage_error("verify --target: IMAGE must be a file");
		return cmd_check_target(key, argv[optind], index, target, zero);
	}
	if (!strcmp(cmd, "sign") || !strcmp(cmd, "verify")) {
		if (nargs != 1)
			cli_usage_error("%s: expected IMAGE", cmd);
		if (!key)
			cli_usage_error("%s: -k KEYFILE is needed", cmd);
		if (index && strcmp(cmd, "sign") != 0)
			cli_usage_error("verify: -x only with --target");
		return !strcmp(cmd, "sign") ? cmd_sign(key, argv[optind], manifest, index) :
		       cmd_verify(key, argv[optind], manifest);
	}
	cli_usage_error("unknown command '%s' (generate, sign, verify, index, show)", cmd);
}
