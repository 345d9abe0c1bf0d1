#!/bin/sh
# The test vectors of doc/vectors (tests/tools/make-vectors.sh made them): every hash
# their README lists holds; the recipe makes the source again; the images restore to
# it; imagezip makes the plain images again byte for byte (any thread count); the
# manifests verify with the public key, and signing again gives the same bytes; the
# encrypted images restore with the key and with nothing else.
. "$NDZ_TOP/tests/lib.sh"
V=$NDZ_TOP/doc/vectors
command -v sha256sum >/dev/null || skip_all "no sha256sum"
command -v gzip >/dev/null || skip_all "no gzip"
. "$V/recipe.sh"
sum() { sha256sum | cut -d' ' -f1; }

# listed NAME: the SHA-256 README.md gives for NAME
listed() { sed -n "s/^| \`$1\` | \`\([0-9a-f]\{64\}\)\` |.*/\1/p" "$V/README.md"; }

# every row's hash, of the file, or of what its .gz holds, or (source) of the recipe's output
vec_source >"$T/source"
rows=$(sed -n 's/^| `\([^`]*\)` | `[0-9a-f]\{64\}` |.*/\1/p' "$V/README.md")
check "README.md lists the vectors ($(echo "$rows" | wc -l) rows)" [ "$(echo "$rows" | wc -l)" -ge 12 ]
for f in $rows; do
	want=$(listed "$f")
	if [ "$f" = source ]; then got=$(sum <"$T/source")
	elif [ -f "$V/$f" ]; then got=$(sum <"$V/$f")
	elif [ -f "$V/$f.gz" ]; then got=$(gzip -dc "$V/$f.gz" | sum)
	else got=missing; fi
	if [ "$got" = "$want" ]; then ok "$f: SHA-256 as listed"
	else not_ok "$f: SHA-256 $got, listed ${want:-none}"; fi
done
unlisted=""
for f in "$V"/*; do
	f=${f##*/}
	[ "$f" = README.md ] || echo "$rows" | grep -qx -- "$f" || unlisted="$unlisted $f"
done
check "every file of doc/vectors is listed${unlisted:+; not:$unlisted}" [ -z "$unlisted" ]

for i in image image-zlib image-aes image-xchacha; do
	gzip -dc "$V/$i.ndz.gz" >"$T/$i.ndz" || not_ok "gunzip $i.ndz.gz"
done
# the secret keys as our programs take them: not readable by group or others
cp "$V/signing.sec" "$V/enc.key" "$V/signing.pub" "$T/" && chmod 600 "$T/signing.sec" "$T/enc.key"

# restore
for i in image image-zlib; do
	rm -f "$T/out"
	"$IMAGEUNZIP" -q "$T/$i.ndz" "$T/out"
	check "$i.ndz restores to the source's bytes" cmp -s "$T/out" "$T/source"
done

# imagezip is deterministic: no time or host in an image, the same for any -j
for j in 1 3; do
	rm -f "$T/again.ndz" "$T/again-zlib.ndz"
	"$IMAGEZIP" -q -j $j --codec zstd -z 3 --uuid "$VEC_UUID_ZSTD" "$T/source" "$T/again.ndz"
	check "imagezip -j $j of the source makes image.ndz again, byte for byte" \
		cmp -s "$T/again.ndz" "$T/image.ndz"
	"$IMAGEZIP" -q -j $j --codec zlib -z 4 --uuid "$VEC_UUID_ZLIB" "$T/source" "$T/again-zlib.ndz"
	check "imagezip -j $j --codec zlib makes image-zlib.ndz again, byte for byte" \
		cmp -s "$T/again-zlib.ndz" "$T/image-zlib.ndz"
done

# signatures
for i in image image-aes; do
	cp "$V/$i.ndz.manifest" "$T/"
	check "$i.ndz.manifest verifies with signing.pub (imagekey verify)" \
		"$NDZ_BIN/imagekey" verify -q -k "$T/signing.pub" "$T/$i.ndz"
	"$NDZ_BIN/imagekey" sign -q -k "$T/signing.sec" -m "$T/$i.resigned" "$T/$i.ndz"
	check "signing $i.ndz again with signing.sec gives the same manifest (Ed25519)" \
		cmp -s "$T/$i.resigned" "$V/$i.ndz.manifest"
done
rm -f "$T/out"
"$IMAGEUNZIP" -q -k "$T/signing.pub" "$T/image.ndz" "$T/out"
check "imageunzip --key signing.pub restores image.ndz to the source" cmp -s "$T/out" "$T/source"
# the check can fail: a byte of the chunk's data changed
cp "$T/image.ndz" "$T/bad.ndz" && cp "$T/image.ndz.manifest" "$T/bad.ndz.manifest"
printf 'X' | dd of="$T/bad.ndz" bs=1 seek=5000 conv=notrunc 2>/dev/null
check "a changed image.ndz does not verify" \
	sh -c "! '$NDZ_BIN/imagekey' verify -q -k '$T/signing.pub' '$T/bad.ndz' 2>/dev/null"

# encryption
for i in image-aes image-xchacha; do
	rm -f "$T/out"
	"$IMAGEUNZIP" -q -k "$T/enc.key" "$T/$i.ndz" "$T/out"
	check "$i.ndz restores to the source with enc.key" cmp -s "$T/out" "$T/source"
	rm -f "$T/out"
	check "$i.ndz without a key is refused" \
		sh -c "! '$IMAGEUNZIP' -q '$T/$i.ndz' '$T/out' 2>/dev/null"
done
rm -f "$T/out"
"$IMAGEUNZIP" -q -k "$T/signing.pub" -k "$T/enc.key" "$T/image-aes.ndz" "$T/out"
check "image-aes.ndz restores signed and encrypted (both keys)" cmp -s "$T/out" "$T/source"
# its header names the key: offset 120, 8 bytes, the id imagekey shows
id=$(od -An -tx1 -j120 -N8 "$T/image-aes.ndz" | tr -d ' \n')
check "image-aes.ndz's chunk header names enc.key's id ($id)" \
	sh -c "'$NDZ_BIN/imagekey' show '$T/enc.key' | grep -q ' $id\$'"
done_testing
