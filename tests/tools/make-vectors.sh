#!/bin/sh
# Makes the test vectors of doc/vectors (run once; the files are committed) and their
# README.md with every file's SHA-256. tests/cli/vectors.sh checks them.
# Usage: tests/tools/make-vectors.sh [BINDIR [OUTDIR]]   (default build/bin, doc/vectors)
# The keys are made anew on every run (imagekey generate is random), and so are the
# encrypted images' nonces: running it again changes those files and their hashes.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$TOP/build/bin}
OUT=${2:-$TOP/doc/vectors}
. "$TOP/doc/vectors/recipe.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/ndz-vectors.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W"

vec_source >source
"$BIN/imagezip" -q --codec zstd -z 3 --uuid "$VEC_UUID_ZSTD" source image.ndz
"$BIN/imagezip" -q --codec zlib -z 4 --uuid "$VEC_UUID_ZLIB" source image-zlib.ndz
"$BIN/imagekey" generate -q -o signing
"$BIN/imagekey" sign -q -k signing.sec image.ndz
"$BIN/imagekey" generate -q -e -o enc
"$BIN/imagezip" -q --codec zstd -z 3 --uuid "$VEC_UUID_AES" --encrypt enc.key \
	--cipher aes256gcm source image-aes.ndz
"$BIN/imagezip" -q --codec zstd -z 3 --uuid "$VEC_UUID_XCHACHA" --encrypt enc.key \
	--cipher xchacha20 source image-xchacha.ndz
"$BIN/imagekey" sign -q -k signing.sec image-aes.ndz
for i in image image-zlib image-aes image-xchacha; do
	gzip -9 -n -c "$i.ndz" >"$i.ndz.gz"
done

sum() { sha256sum "$1" | cut -d' ' -f1; }
keyid() { "$BIN/imagekey" show "$1" | awk '{ print $NF }'; }
row() { printf '| `%s` | `%s` | %s |\n' "$1" "$(sum "$1")" "$2"; }
mkdir -p "$OUT"
cp signing.sec signing.pub enc.key image.ndz.manifest image-aes.ndz.manifest \
	image.ndz.gz image-zlib.ndz.gz image-aes.ndz.gz image-xchacha.ndz.gz "$OUT/"
cp "$TOP/doc/vectors/recipe.sh" recipe.sh
[ "$OUT/recipe.sh" -ef recipe.sh ] || [ "$OUT/recipe.sh" -ef "$TOP/doc/vectors/recipe.sh" ] ||
	cp recipe.sh "$OUT/"
{
	cat <<'EOT'
# Test vectors

Small files made once by `tests/tools/make-vectors.sh` from the recipe in
`recipe.sh`, so that another implementation (or a later version of ours) can check
itself against known bytes; `tests/cli/vectors.sh` checks them in the suite. The
images are stored gzipped (`gzip -9 -n`): an image is whole 1 MiB chunks, mostly
zero padding here. A `.gz` file's row and the row of what it holds both give a
SHA-256.

The source is 300,563 bytes of text lines and zeros (`vec_source` in `recipe.sh`,
POSIX sh and awk). The images hold it in one chunk each, `image_kind` 0, with the
UUIDs `recipe.sh` names. imagezip writes no time or host into an image, and its
output does not depend on the number of threads: given the UUID (`--uuid`), codec
and level, it makes the very same bytes again, and the test checks that it does.
The keys and the encrypted images cannot be made again: `imagekey generate` draws
random keys and every encrypted chunk a random nonce. Ed25519 signatures are
deterministic, so signing an image again with `signing.sec` gives the same
manifest. The secret key files are test keys, published: never sign or encrypt
anything else with them. Git keeps them mode 0644; our programs refuse a secret
key that group or others may read, so copy them and `chmod 600` the copies first.

| file | SHA-256 | what |
|---|---|---|
EOT
	row recipe.sh "the recipe: the source's bytes and the images' UUIDs"
	row source "the source (made by the recipe, not stored)"
	row image.ndz "zstd level 3, UUID \`$VEC_UUID_ZSTD\` (in image.ndz.gz)"
	row image.ndz.gz "image.ndz, gzipped"
	row image-zlib.ndz "zlib level 4, UUID \`$VEC_UUID_ZLIB\` (in image-zlib.ndz.gz)"
	row image-zlib.ndz.gz "image-zlib.ndz, gzipped"
	row signing.sec "an Ed25519 signing key (\`imagekey generate -o signing\`), id $(keyid signing.sec)"
	row signing.pub "its public half"
	row image.ndz.manifest "image.ndz's manifest, signed with signing.sec (SHA-256 chunk hashes)"
	row enc.key "an encryption key (\`imagekey generate -e -o enc\`), id $(keyid enc.key)"
	row image-aes.ndz "the source encrypted with enc.key, AES-256-GCM, zstd level 3, UUID \`$VEC_UUID_AES\` (in image-aes.ndz.gz)"
	row image-aes.ndz.gz "image-aes.ndz, gzipped"
	row image-aes.ndz.manifest "image-aes.ndz's manifest, signed with signing.sec (encrypted flag set)"
	row image-xchacha.ndz "the source encrypted with enc.key, XChaCha20-Poly1305, zstd level 3, UUID \`$VEC_UUID_XCHACHA\` (in image-xchacha.ndz.gz)"
	row image-xchacha.ndz.gz "image-xchacha.ndz, gzipped"
	cat <<'EOT'

Made with:

```sh
. doc/vectors/recipe.sh; vec_source >source
imagezip --codec zstd -z 3 --uuid $VEC_UUID_ZSTD source image.ndz
imagezip --codec zlib -z 4 --uuid $VEC_UUID_ZLIB source image-zlib.ndz
imagekey generate -o signing; imagekey sign -k signing.sec image.ndz
imagekey generate -e -o enc
imagezip --codec zstd -z 3 --uuid $VEC_UUID_AES --encrypt enc.key --cipher aes256gcm source image-aes.ndz
imagezip --codec zstd -z 3 --uuid $VEC_UUID_XCHACHA --encrypt enc.key --cipher xchacha20 source image-xchacha.ndz
imagekey sign -k signing.sec image-aes.ndz
```
EOT
} >"$OUT/README.md"
echo "made $(ls "$OUT" | wc -l) files in $OUT ($(du -sk "$OUT" | cut -f1) KiB)"
