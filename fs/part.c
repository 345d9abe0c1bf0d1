/* Decoding MBR, GPT and BSD disklabel partition tables into struct ndz_ptable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/err.h"
#include "core/format.h"
#include "core/le.h"
#include "part.h"

#define SEC NDZ_SECTOR_SIZE
#define MAX_LOGICAL 128                /* EBR chain length limit: loops and garbage */
#define GPT_MAX_ARRAY (1u << 20)       /* bytes of GPT entry array we accept */

void ndz_ptable_init(struct ndz_ptable *t)
{
	memset(t, 0, sizeof(*t));
	ndz_ranges_init(&t->meta);
}

void ndz_ptable_release(struct ndz_ptable *t)
{
	free(t->v);
	ndz_ranges_release(&t->meta);
	ndz_ptable_init(t);
}

static int add_part(struct ndz_ptable *t, const struct ndz_part *p)
{
	struct ndz_part *nv = realloc(t->v, (t->n + 1) * sizeof(*nv));

	if (!nv)
		return NDZ_ENOMEM;
	t->v = nv;
	t->v[t->n++] = *p;
	return 0;
}

/* A partition entry with nothing but where it is and its type set. */
static struct ndz_part new_part(int index, uint64_t start, uint64_t count, uint32_t type)
{
	struct ndz_part p;

	memset(&p, 0, sizeof(p));
	p.index = index;
	p.start = start;
	p.count = count;
	p.type = type;
	return p;
}

const struct ndz_part *ndz_part_find(const struct ndz_ptable *t, int index)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].index == index)
			return &t->v[i];
	return NULL;
}

/* The table is malformed: what says how; the caller names the disk. */
static int fail(struct ndz_error *e, const char *what)
{
	return ndz_error_set(e, NDZ_EPART, 0, "%s: %s", ndz_strerror(NDZ_EPART), what);
}

static int read_sector(struct ndz_io *io, uint64_t lba, uint8_t *buf)
{
	if (lba > UINT64_MAX / SEC)
		return NDZ_ERANGE;
	return ndz_io_read_full(io, buf, SEC, lba * SEC, NULL, NULL);
}

static void set_first_start(struct ndz_ptable *t)
{
	t->first_start = 0;
	for (size_t i = 0; i < t->n; i++)
		if (!t->first_start || t->v[i].start < t->first_start)
			t->first_start = t->v[i].start;
}

/* ---- MBR ---- */

static int is_extended(uint8_t type)
{
	return type == 0x05 || type == 0x0f || type == 0x85;
}

/* A boot sector of a filesystem also ends in 55 aa: do not read it as a table. */
static int looks_like_vbr(const uint8_t *s)
{
	if (!memcmp(s + 3, "NTFS    ", 8) || !memcmp(s + 3, "EXFAT   ", 8))
		return 1;
	if (!memcmp(s + 54, "FAT1", 4) || !memcmp(s + 82, "FAT32   ", 8))
		return 1;
	return 0;
}

static void mbr_entry(const uint8_t *e, uint8_t *boot, uint8_t *type, uint64_t *start,
		      uint64_t *count)
{
	*boot = e[0];
	*type = e[4];
	*start = get_le32(e + 8);
	*count = get_le32(e + 12);
}

static int read_logical(struct ndz_io *disk, struct ndz_ptable *t, const struct ndz_part *ext,
			uint8_t *buf, struct ndz_error *err)
{
	uint64_t ebr = ext->start;
	int index = 5;

	for (int i = 0; i < MAX_LOGICAL; i++) {
		uint8_t boot, type, ntype;
		uint64_t start, count, nstart, ncount;
		int rc = read_sector(disk, ebr, buf);

		if (rc < 0)
			return rc == NDZ_ESHORTREAD ?
				fail(err, "extended boot record beyond the disk") : rc;
		if (buf[510] != 0x55 || buf[511] != 0xaa)
			return fail(err, "extended boot record without signature");
		rc = ndz_ranges_add(&t->meta, ebr, 1, NULL);
		if (rc < 0)
			return rc;
		mbr_entry(buf + 446, &boot, &type, &start, &count);
		mbr_entry(buf + 446 + 16, &boot, &ntype, &nstart, &ncount);
		if (type && count) {
			struct ndz_part p = new_part(index++, ebr + start, count, type);

			if (start == 0 || p.start + p.count > ext->start + ext->count)
				return fail(err, "logical partition outside its extended partition");
			rc = add_part(t, &p);
			if (rc < 0)
				return rc;
		}
		if (!ntype || !ncount)
			return 0;
		if (!is_extended(ntype) || ext->start + nstart <= ebr ||
		    nstart >= ext->count)
			return fail(err, "broken chain of logical partitions");
		ebr = ext->start + nstart;
	}
	return fail(err, "too many logical partitions");
}

static int read_mbr(struct ndz_io *disk, struct ndz_ptable *t, uint8_t *buf,
		    struct ndz_error *err)
{
	uint64_t sectors = disk->size / SEC;
	struct ndz_part ext = { 0 };
	int have_ext = 0;
	int rc;

	for (int i = 0; i < 4; i++) {
		uint8_t boot, type;
		uint64_t start, count;
		struct ndz_part p;

		mbr_entry(buf + 446 + 16 * i, &boot, &type, &start, &count);
		if (!type || !count)
			continue;
		p = new_part(i + 1, start, count, type);
		if (start == 0 || start + count > sectors)
			return fail(err, "partition beyond the disk");
		for (size_t j = 0; j < t->n; j++)
			if (p.start < t->v[j].start + t->v[j].count &&
			    t->v[j].start < p.start + p.count)
				return fail(err, "overlapping partitions");
		if (is_extended(type)) {
			if (have_ext)
				return fail(err, "two extended partitions");
			p.container = 1;
			ext = p;
			have_ext = 1;
		}
		rc = add_part(t, &p);
		if (rc < 0)
			return rc;
	}
	t->scheme = NDZ_SCHEME_MBR;
	if (have_ext) {
		rc = read_logical(disk, t, &ext, buf, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- GPT ---- */

struct gpt_hdr {
	uint64_t my_lba, alt_lba, first_usable, last_usable, entries_lba;
	uint32_t nentries, entry_size, entries_crc;
};

static const struct {
	uint32_t code;
	uint8_t guid[16];              /* on-disk (mixed-endian) byte order */
} gpt_types[] = {
	{ NDZ_GPT_LINUX, { 0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47,
			   0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4 } },
	{ NDZ_GPT_LINUX_SWAP, { 0x6d, 0xfd, 0x57, 0x06, 0xab, 0xa4, 0xc4, 0x43,
				0x84, 0xe5, 0x09, 0x33, 0xc8, 0x4b, 0x4f, 0x4f } },
	{ NDZ_GPT_EFI, { 0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11,
			 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b } },
	{ NDZ_GPT_MSDATA, { 0xa2, 0xa0, 0xd0, 0xeb, 0xe5, 0xb9, 0x33, 0x44,
			    0x87, 0xc0, 0x68, 0xb6, 0xb7, 0x26, 0x99, 0xc7 } },
	{ NDZ_GPT_BIOS_BOOT, { 0x48, 0x61, 0x68, 0x21, 0x49, 0x64, 0x6f, 0x6e,
			       0x74, 0x4e, 0x65, 0x65, 0x64, 0x45, 0x46, 0x49 } },
	{ NDZ_GPT_FREEBSD, { 0xb4, 0x7c, 0x6e, 0x51, 0xcf, 0x6e, 0xd6, 0x11,
			     0x8f, 0xf8, 0x00, 0x02, 0x2d, 0x09, 0x71, 0x2b } },
	{ NDZ_GPT_FREEBSD_SWAP, { 0xb5, 0x7c, 0x6e, 0x51, 0xcf, 0x6e, 0xd6, 0x11,
				  0x8f, 0xf8, 0x00, 0x02, 0x2d, 0x09, 0x71, 0x2b } },
	{ NDZ_GPT_FREEBSD_UFS, { 0xb6, 0x7c, 0x6e, 0x51, 0xcf, 0x6e, 0xd6, 0x11,
				 0x8f, 0xf8, 0x00, 0x02, 0x2d, 0x09, 0x71, 0x2b } },
	{ NDZ_GPT_FREEBSD_BOOT, { 0x9d, 0x6b, 0xbd, 0x83, 0x41, 0x7f, 0xdc, 0x11,
				  0xbe, 0x0b, 0x00, 0x15, 0x60, 0xb8, 0x4f, 0x0f } },
	{ NDZ_GPT_MSRESERVED, { 0x16, 0xe3, 0xc9, 0xe3, 0x5c, 0x0b, 0xb8, 0x4d,
				0x81, 0x7d, 0xf9, 0x2d, 0xf0, 0x02, 0x15, 0xae } },
	{ NDZ_GPT_LINUX_LVM, { 0x79, 0xd3, 0xd6, 0xe6, 0x07, 0xf5, 0xc2, 0x44,
			       0xa2, 0x3c, 0x23, 0x8f, 0x2a, 0x3d, 0xf9, 0x28 } },
};

static uint32_t gpt_code(const uint8_t *guid)
{
	for (size_t i = 0; i < sizeof(gpt_types) / sizeof(gpt_types[0]); i++)
		if (!memcmp(guid, gpt_types[i].guid, 16))
			return gpt_types[i].code;
	return NDZ_GPT_OTHER;
}

/*
 * Read and check the header at lba and its entry array. Returns 0 and *h and
 * *array (malloc'd), 1 when damaged (why in *why), or a negative code.
 */
static int gpt_load(struct ndz_io *disk, uint64_t lba, struct gpt_hdr *h, uint8_t **array,
		    const char **why)
{
	uint64_t sectors = disk->size / SEC;
	uint8_t s[SEC];
	uint32_t hsize, crc;
	uint64_t alen;
	uint8_t *a;
	int rc;

	*array = NULL;
	if (lba == 0 || lba >= sectors) {
		*why = "header beyond the disk";
		return 1;
	}
	rc = read_sector(disk, lba, s);
	if (rc < 0)
		return rc;
	if (memcmp(s, "EFI PART", 8)) {
		*why = "no header signature";
		return 1;
	}
	hsize = get_le32(s + 12);
	if (hsize < 92 || hsize > SEC) {
		*why = "bad header size";
		return 1;
	}
	crc = get_le32(s + 16);
	put_le32(s + 16, 0);
	if ((uint32_t)crc32(0, s, hsize) != crc) {
		*why = "bad header checksum";
		return 1;
	}
	h->my_lba = get_le64(s + 24);
	h->alt_lba = get_le64(s + 32);
	h->first_usable = get_le64(s + 40);
	h->last_usable = get_le64(s + 48);
	h->entries_lba = get_le64(s + 72);
	h->nentries = get_le32(s + 80);
	h->entry_size = get_le32(s + 84);
	h->entries_crc = get_le32(s + 88);
	if (h->my_lba != lba) {
		*why = "header in the wrong place";
		return 1;
	}
	if (h->entry_size < 128 || h->entry_size % 8 || h->nentries == 0 ||
	    (uint64_t)h->nentries * h->entry_size > GPT_MAX_ARRAY) {
		*why = "bad entry array size";
		return 1;
	}
	alen = (uint64_t)h->nentries * h->entry_size;
	if (h->first_usable > h->last_usable || h->last_usable >= sectors ||
	    h->entries_lba == 0 || h->entries_lba >= sectors ||
	    h->entries_lba + (alen + SEC - 1) / SEC > sectors) {
		*why = "header fields beyond the disk";
		return 1;
	}
	a = malloc(alen);
	if (!a)
		return NDZ_ENOMEM;
	rc = ndz_io_read_full(disk, a, alen, h->entries_lba * SEC, NULL, NULL);
	if (rc < 0) {
		free(a);
		return rc;
	}
	if ((uint32_t)crc32(0, a, (uInt)alen) != h->entries_crc) {
		free(a);
		*why = "bad partition entry array checksum";
		return 1;
	}
	*array = a;
	return 0;
}

static int read_gpt(struct ndz_io *disk, struct ndz_ptable *t, struct ndz_error *err)
{
	uint64_t sectors = disk->size / SEC;
	struct gpt_hdr h;
	uint8_t *a = NULL;
	const char *why = "", *why2 = "";
	int rc;

	rc = gpt_load(disk, 1, &h, &a, &why);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		/* the backup header is in the disk's last sector */
		rc = gpt_load(disk, sectors - 1, &h, &a, &why2);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			char msg[160];

			snprintf(msg, sizeof(msg), "GPT primary: %s; backup: %s", why, why2);
			return fail(err, msg);
		}
		t->used_backup = 1;
		snprintf(t->note, sizeof(t->note), "primary GPT damaged (%s), backup used", why);
	}
	t->scheme = NDZ_SCHEME_GPT;
	for (uint32_t i = 0; i < h.nentries; i++) {
		const uint8_t *e = a + (size_t)i * h.entry_size;
		static const uint8_t zero[16];
		uint64_t first = get_le64(e + 32), last = get_le64(e + 40);
		struct ndz_part p;

		if (!memcmp(e, zero, 16))
			continue;
		if (first > last || last >= sectors) {
			free(a);
			return fail(err, "GPT partition beyond the disk");
		}
		p = new_part((int)i + 1, first, last - first + 1, gpt_code(e));
		memcpy(p.guid, e, 16);
		rc = add_part(t, &p);
		if (rc < 0) {
			free(a);
			return rc;
		}
	}
	free(a);
	/* the backup array and header sit after the last usable sector */
	return ndz_ranges_add(&t->meta, h.last_usable + 1, sectors - (h.last_usable + 1), NULL);
}

static int read_table(struct ndz_io *disk, struct ndz_ptable *t, struct ndz_error *err)
{
	uint8_t buf[SEC];
	int gpt = 0, valid = 1, any = 0;
	int rc;

	ndz_ptable_release(t);
	if (disk->size < 2 * SEC)
		return 0;
	rc = read_sector(disk, 0, buf);
	if (rc < 0)
		return rc;
	if (buf[510] != 0x55 || buf[511] != 0xaa || looks_like_vbr(buf))
		return 0;
	for (int i = 0; i < 4; i++) {
		const uint8_t *e = buf + 446 + 16 * i;

		if (e[0] != 0 && e[0] != 0x80)
			valid = 0;
		if (e[4])
			any = 1;
		if (e[4] == 0xee)
			gpt = 1;
	}
	if (!valid || !any)
		return 0;
	rc = gpt ? read_gpt(disk, t, err) : read_mbr(disk, t, buf, err);
	if (rc < 0) {
		ndz_ptable_release(t);
		return rc;
	}
	set_first_start(t);
	ndz_ranges_normalize(&t->meta);
	return 0;
}

int ndz_part_read(struct ndz_io *disk, struct ndz_ptable *t, struct ndz_error *err)
{
	int rc = read_table(disk, t, err);

	return rc < 0 ? ndz_error_set(err, rc, 0, NULL) : 0;
}

/* ---- BSD disklabel ---- */

#define BSD_MAGIC 0x82564557u
#define BSD_OFF_MAGIC2 132
#define BSD_OFF_CSUM 136
#define BSD_OFF_NPART 138
#define BSD_OFF_PARTS 148
#define BSD_MAXPART ((SEC - BSD_OFF_PARTS) / 16)
#define BSD_RAW_PART 2                 /* 'c': the whole slice */

static int read_label(struct ndz_io *slice, struct ndz_ptable *t, struct ndz_error *err)
{
	uint64_t sectors = slice->size / SEC;
	uint8_t s[SEC];
	uint16_t csum = 0;
	unsigned npart, len;
	uint64_t base = 0;
	int rc;

	ndz_ptable_release(t);
	if (slice->size < 2 * SEC)
		return 0;
	rc = read_sector(slice, 1, s);
	if (rc < 0)
		return rc;
	if (get_le32(s) != BSD_MAGIC || get_le32(s + BSD_OFF_MAGIC2) != BSD_MAGIC)
		return 0;
	npart = get_le16(s + BSD_OFF_NPART);
	if (npart == 0 || npart > BSD_MAXPART)
		return fail(err, "disklabel partition count out of range");
	len = BSD_OFF_PARTS + 16 * npart;
	for (unsigned i = 0; i < len; i += 2)
		csum ^= get_le16(s + i);
	if (csum)
		return fail(err, "bad disklabel checksum");
	/* offsets are absolute on older labels: 'c' starts where the slice does */
	if (npart > BSD_RAW_PART)
		base = get_le32(s + BSD_OFF_PARTS + 16 * BSD_RAW_PART + 4);
	t->scheme = NDZ_SCHEME_BSD;
	for (unsigned i = 0; i < npart; i++) {
		const uint8_t *e = s + BSD_OFF_PARTS + 16 * i;
		uint64_t size = get_le32(e), off = get_le32(e + 4);
		struct ndz_part p;

		if (i == BSD_RAW_PART || size == 0)
			continue;
		/* old labels may describe the whole disk ('d'): not ours unless in use */
		if ((off < base || off - base >= sectors || size > sectors - (off - base)) &&
		    e[12] == NDZ_BSD_UNUSED)
			continue;
		if (off < base || off - base >= sectors || size > sectors - (off - base)) {
			ndz_ptable_release(t);
			return fail(err, "disklabel partition beyond the slice");
		}
		p = new_part((int)i + 1, off - base, size, e[12]);
		rc = add_part(t, &p);
		if (rc < 0) {
			ndz_ptable_release(t);
			return rc;
		}
	}
	set_first_start(t);
	return 0;
}

int ndz_bsd_read(struct ndz_io *slice, struct ndz_ptable *t, struct ndz_error *err)
{
	int rc = read_label(slice, t, err);

	return rc < 0 ? ndz_error_set(err, rc, 0, NULL) : 0;
}

/* ---- names ---- */

const char *ndz_part_type_name(enum ndz_scheme scheme, uint32_t type)
{
	if (scheme == NDZ_SCHEME_BSD) {
		switch (type) {
		case NDZ_BSD_SWAP: return "freebsd-swap";
		case NDZ_BSD_FFS: return "freebsd-ufs";
		default: return "bsd-other";
		}
	}
	switch (type) {
	case 0x01: case 0x04: case 0x06: case 0x0b: case 0x0c: case 0x0e: return "fat";
	case 0x05: case 0x0f: case 0x85: return "extended";
	case 0x07: return "ntfs/exfat";
	case 0x82: return "linux-swap";
	case 0x83: return "linux";
	case 0x8e: return "linux-lvm";
	case 0xa5: return "freebsd";
	case 0xa6: return "openbsd";
	case 0xa9: return "netbsd";
	case 0xef: return "efi";
	case NDZ_GPT_LINUX: return "linux";
	case NDZ_GPT_LINUX_SWAP: return "linux-swap";
	case NDZ_GPT_EFI: return "efi";
	case NDZ_GPT_MSDATA: return "ms-basic-data";
	case NDZ_GPT_BIOS_BOOT: return "bios-boot";
	case NDZ_GPT_FREEBSD: return "freebsd";
	case NDZ_GPT_FREEBSD_SWAP: return "freebsd-swap";
	case NDZ_GPT_FREEBSD_UFS: return "freebsd-ufs";
	case NDZ_GPT_FREEBSD_BOOT: return "freebsd-boot";
	case NDZ_GPT_MSRESERVED: return "ms-reserved";
	case NDZ_GPT_LINUX_LVM: return "linux-lvm";
	default: return "other";
	}
}

int ndz_part_holds_bsd(enum ndz_scheme scheme, uint32_t type)
{
	return (scheme == NDZ_SCHEME_MBR && type == 0xa5) ||
	       (scheme == NDZ_SCHEME_GPT && type == NDZ_GPT_FREEBSD);
}
