/*
 * s3tool ENDPOINT BUCKET CREDENTIALS OP ...: the object store's client (lib/ctl/s3) for
 * the tests. OP: "mkbucket"; "put KEY FILE [PART]" (PART: a multipart upload's part, bytes);
 * "get KEY [OFF LEN]" (to stdout); "head KEY"
 * (prints the size). Exits 0, or 1 with the client's message on stderr.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl/s3.h"

int main(int argc, char **argv)
{
	struct ndz_s3_conf c = { 0 };
	struct ndz_s3 *s = NULL;
	struct ndz_error e = { 0 };
	int rc = NDZ_EINVAL;

	if (argc < 5) {
		fprintf(stderr, "usage: s3tool ENDPOINT BUCKET CREDENTIALS mkbucket|put KEY FILE [PART]|"
			"get KEY [OFF LEN]|head KEY\n");
		return 2;
	}
	c.endpoint = argv[1];
	c.bucket = argv[2];
	c.credentials = argv[3];
	if (argc == 8 && strcmp(argv[4], "put") == 0)
		c.part_bytes = strtoull(argv[7], NULL, 0);
	if (ndz_s3_open(&c, 10, &s, &e) != 0)
		goto out;
	if (strcmp(argv[4], "mkbucket") == 0) {
		rc = ndz_s3_put(s, "", "", 0, &e);
	} else if (strcmp(argv[4], "put") == 0 && (argc == 7 || argc == 8)) {
		int fd = open(argv[6], O_RDONLY);
		struct stat st;

		if (fd < 0 || fstat(fd, &st) != 0) {
			perror(argv[6]);
			return 1;
		}
		rc = ndz_s3_put_fd(s, argv[5], fd, (uint64_t)st.st_size, &e);
		close(fd);
	} else if (strcmp(argv[4], "get") == 0 && (argc == 6 || argc == 8)) {
		uint8_t *b;
		size_t len;

		rc = ndz_s3_get(s, argv[5], argc == 8 ? strtoull(argv[6], NULL, 0) : 0,
				argc == 8 ? strtoull(argv[7], NULL, 0) : 0, 1ull << 30, &b, &len, &e);
		if (rc == 0 && fwrite(b, 1, len, stdout) != len)
			rc = ndz_error_set(&e, NDZ_EIO, 0, "stdout");
		if (rc == 0 && fflush(stdout) != 0)
			rc = ndz_error_set(&e, NDZ_EIO, 0, "stdout");
		if (rc == 0)
			free(b);
	} else if (strcmp(argv[4], "head") == 0 && argc == 6) {
		uint64_t n;

		if ((rc = ndz_s3_head(s, argv[5], &n, &e)) == 0)
			printf("%llu\n", (unsigned long long)n);
	} else {
		ndz_error_set(&e, NDZ_EINVAL, 0, "s3tool: unknown operation '%s'", argv[4]);
	}
out:
	ndz_s3_free(s);
	if (rc != 0)
		fprintf(stderr, "s3tool: %s\n", ndz_error_msg(&e));
	return rc != 0;
}
