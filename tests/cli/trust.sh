#!/bin/sh
# Signed and encrypted images: imagekey, imagezip --sign/--encrypt, imageunzip --key.
# Forgeries are CRC-valid (tests/helpers/mkforge fixes both CRCs after each change):
# only the signature or the AEAD can catch them, and must before a byte is written.
. "$NDZ_TOP/tests/lib.sh"
FORGE="$NDZ_BUILD/tests/helpers/mkforge"
MK="$NDZ_BUILD/tests/helpers/mkcorrupt"
[ -x "$FORGE" ] && [ -x "$MK" ] || skip_all "mkforge or mkcorrupt helper not built"
IMAGEKEY="$NDZ_BIN/imagekey"
C=1048576
cd "$T" || exit 1
# Bytes of the one-chunk images' headers changed: every STEP-th (fewer when sanitized).
STEP=13
[ "${NDZ_SANITIZED:-0}" = 1 ] && STEP=41

# fails DESC PATTERN CMD...: CMD exits 1 and says PATTERN (grep -E) on stderr.
fails() {
	d=$1 pat=$2
	shift 2
	"$@" >/dev/null 2>"$T/err"
	rc=$?
	if [ "$rc" -eq 1 ] && grep -Eq -- "$pat" "$T/err"; then
		ok "$d"
	else
		not_ok "$d (exit $rc: $(cat "$T/err"))"
	fi
}
# A target of 0xa5 bytes the size of the source, and its checksum, to see it untouched.
fill_a5() { head -c "$1" /dev/zero | tr '\000' '\245' >"$2"; }

"$IMAGEKEY" -q generate -o k && "$IMAGEKEY" -q generate -o k2 &&
	"$IMAGEKEY" -q generate -e -o ek && "$IMAGEKEY" -q generate -e -o ek2 ||
	{ not_ok "imagekey generate"; done_testing; }
check "secret key files are mode 0600, public 0644" \
	test "$(stat -c %a k.sec):$(stat -c %a k.pub):$(stat -c %a ek.key)" = 600:644:600
check "imagekey show names the type" sh -c "'$IMAGEKEY' show k.pub | grep -q 'ed25519-public key [0-9a-f]\{16\}'"
fails "generate never overwrites a key file" "k.sec" "$IMAGEKEY" generate -o k

# Sources: one chunk (the dense tamper run) and three chunks, twice with one uuid.
{ head -c 200000 /dev/urandom; cat "$NDZ_TOP"/lib/*/*.c | head -c 300000; } >small
{ head -c 2500000 /dev/urandom; cat "$NDZ_TOP"/lib/*/*.c; } >big
{ head -c 2500000 /dev/urandom; cat "$NDZ_TOP"/lib/*/*.c; } >big2
U=0123456789abcdef0123456789abcdef
"$IMAGEZIP" -q -r --sign k.sec small s1.ndz &&
	"$IMAGEZIP" -q -r --uuid $U --sign k.sec big a.ndz &&
	"$IMAGEZIP" -q -r --uuid $U --sign k.sec big2 b.ndz &&
	"$IMAGEZIP" -q -r big plain.ndz ||
	{ not_ok "imagezip --sign"; done_testing; }
check "a one-chunk and two three-chunk images" \
	test "$(stat -c %s s1.ndz):$(stat -c %s a.ndz):$(stat -c %s b.ndz)" = $C:$((3 * C)):$((3 * C))
check "imagezip --sign writes IMAGE.manifest of 64 + 32 x chunks + 64 bytes" \
	test "$(stat -c %s a.ndz.manifest)" -eq $((64 + 3 * 32 + 64))

# ---- signed: the good paths ----
check "imageunzip --key restores a signed image" sh -c \
	"'$IMAGEUNZIP' -q --key k.pub a.ndz out && cmp -s big out"
check "imageunzip -n --key verifies offline" "$IMAGEUNZIP" -q -n --key k.pub a.ndz
check "a stream with --manifest" sh -c \
	"'$IMAGEUNZIP' -q --key k.pub --manifest a.ndz.manifest - out2 <a.ndz && cmp -s big out2"
check "without --key a signed image restores as before" sh -c \
	"'$IMAGEUNZIP' -q a.ndz out3 && cmp -s big out3"
check "imagekey verify" "$IMAGEKEY" -q verify -k k.pub a.ndz
cp a.ndz late.ndz
check "imagekey sign after the fact gives the same manifest" sh -c \
	"'$IMAGEKEY' sign -k k.sec late.ndz && cmp -s late.ndz.manifest a.ndz.manifest"
check "imagekey sign -m from stdin" sh -c \
	"'$IMAGEKEY' sign -k k.sec -m st.sig - <a.ndz && cmp -s st.sig a.ndz.manifest"
check "zstd images are signed too" sh -c \
	"'$IMAGEZIP' -q -r --codec zstd --sign k.sec big z.ndz && '$IMAGEUNZIP' -q --key k.pub z.ndz zout && cmp -s big zout"

# ---- signed: refusals, before anything is written ----
fill_a5 "$(stat -c %s big)" ref
cp ref tgt
fails "an unsigned image" "plain.ndz: image is not signed" "$IMAGEUNZIP" --key k.pub plain.ndz tgt
fails "another key: named by its id, at once" \
	"signed or encrypted with another key: manifest signed by another key \(id $(sed -n 's/^id //p' k.pub), not $(sed -n 's/^id //p' k2.pub)\)" \
	"$IMAGEUNZIP" --key k2.pub a.ndz tgt
fails "a secret key is not a public one" "public half is wanted" "$IMAGEUNZIP" --key k.sec a.ndz tgt
cp a.ndz.manifest sig.bak
head -c $((64 + 3 * 32 + 63)) sig.bak >a.ndz.manifest
fails "a truncated manifest" "malformed manifest: 223 bytes, 224 expected" \
	"$IMAGEUNZIP" --key k.pub a.ndz tgt
head -c 100 sig.bak >a.ndz.manifest
fails "a manifest cut in its hashes" "malformed manifest" "$IMAGEUNZIP" --key k.pub a.ndz tgt
: >a.ndz.manifest
fails "an empty manifest" "malformed manifest: too short" "$IMAGEUNZIP" --key k.pub a.ndz tgt
"$FORGE" sig.bak a.ndz.manifest flip 70
fails "a changed chunk hash" "bad manifest signature" "$IMAGEUNZIP" --key k.pub a.ndz tgt
"$FORGE" sig.bak a.ndz.manifest flip 200
fails "a changed signature" "bad manifest signature" "$IMAGEUNZIP" --key k.pub a.ndz tgt
cp sig.bak a.ndz.manifest
fails "a replayed manifest of another image" "manifest is of another image \(uuid differs\)" \
	"$IMAGEUNZIP" --key k.pub --manifest s1.ndz.manifest a.ndz tgt
fails "a replayed manifest of an image with the same uuid" \
	"a.ndz: chunk [0-2]: does not match the signed manifest" \
	"$IMAGEUNZIP" --key k.pub --manifest b.ndz.manifest a.ndz tgt
check "... and nothing was written" cmp -s ref tgt
"$MK" a.ndz swapped.ndz splice 1 b.ndz 1 2>/dev/null
cp a.ndz.manifest swapped.ndz.manifest
fails "a chunk swapped in from another image signed by the same key" \
	"swapped.ndz: chunk 1: does not match the signed manifest" \
	"$IMAGEUNZIP" --key k.pub swapped.ndz tgt
fails "... also with -n" "chunk 1: does not match the signed manifest" \
	"$IMAGEUNZIP" -n --key k.pub swapped.ndz
"$FORGE" a.ndz reordered.ndz swap 1 2
cp a.ndz.manifest reordered.ndz.manifest
fails "reordered chunks (a file: its last chunk is out of place)" \
	"reordered.ndz: duplicate chunk: the file holds 3 chunks but its last one says it is chunk 1" \
	"$IMAGEUNZIP" --key k.pub reordered.ndz tgt
fails "reordered chunks (a stream)" "stdin: chunk 2: found at place 1: chunks out of order" \
	sh -c "'$IMAGEUNZIP' --key k.pub --manifest a.ndz.manifest - tgt <reordered.ndz"
fails "imagekey verify: reordered chunks" "chunks out of order" \
	sh -c "'$IMAGEKEY' verify -k k.pub -m a.ndz.manifest - <reordered.ndz"
fails "imagekey verify: no manifest, the image named" "plain.ndz: image is not signed \(plain.ndz.manifest: no manifest" \
	"$IMAGEKEY" verify -k k.pub plain.ndz
fails "imagekey verify: another image's manifest" "b.ndz: chunk [0-2]: does not match the signed manifest" \
	"$IMAGEKEY" verify -k k.pub -m a.ndz.manifest b.ndz
cp a.ndz.manifest dropped.ndz.manifest
"$MK" a.ndz dropped.ndz drop 1 2>/dev/null
fails "a dropped chunk" "." "$IMAGEUNZIP" --key k.pub dropped.ndz tgt

# forgeries WHAT IMAGE KEY: every STEP-th byte of the one-chunk IMAGE's header area and
# a spread of its data and padding bytes, each changed with both CRCs made right (a
# signed IMAGE's manifest beside it): imageunzip --key KEY refuses each, the target
# untouched
# (the forgeries made 64 at a time by one mkforge (one a run cost as much as the
# imageunzip under ASan), and tried by two workers at once, each in a directory of its
# own: a processor each, where the imageunzips were most of trust's time)
forgeries() {
	fill_a5 "$(stat -c %s small)" sref
	dlen=$(od -An -tu4 -j 88 -N4 "$2" | tr -d ' ')
	offs=$(seq 0 $STEP 4095; seq 4096 1723 $((4096 + dlen - 1)); echo $((4096 + dlen - 1));
		seq $((4096 + dlen)) 49999 $((C - 1)); echo $((C - 1)))
	bad=0 n=0
	for w in w1 w2; do
		rm -rf "$w" && mkdir "$w" && cp sref "$w/stgt" || bad=$((bad + 1))
		if [ -e "$2.manifest" ]; then cp "$2.manifest" "$w/f.ndz.manifest"; fi
	done
	echo $offs | xargs -n 64 >fbatches
	while read -r batch <&3; do
		rm -rf fg && mkdir fg
		# shellcheck disable=SC2086
		"$FORGE" "$2" fg flips $batch || { bad=$((bad + 1)); continue; }
		# shellcheck disable=SC2086
		set -- "$1" "$2" "$3" $batch
		h=$(( ($# - 3 + 1) / 2 ))
		# shellcheck disable=SC2046
		try_forged w1 "$1" "$3" $(echo "$@" | cut -d' ' -f4-$((3 + h))) &
		# shellcheck disable=SC2046
		try_forged w2 "$1" "$3" $(echo "$@" | cut -d' ' -f$((4 + h))-)
		wait $! || bad=$((bad + 1))
		set -- "$1" "$2" "$3"
	done 3<fbatches
	for w in w1 w2; do
		n=$((n + $(cat "$w/n" 2>/dev/null || echo 0)))
		bad=$((bad + $(cat "$w/bad" 2>/dev/null || echo 1)))
	done
	check "$1: $n CRC-valid single-byte forgeries all refused before a write" test "$bad" -eq 0
}
# try_forged DIR WHAT KEY OFFSET...: each forgery fg/OFFSET as DIR/f.ndz, restored with
# KEY to DIR/stgt: refused, the target untouched; counts in DIR/n and DIR/bad
try_forged() {
	_fd=$1 _what=$2 _key=$3
	shift 3
	_fn=$(cat "$_fd/n" 2>/dev/null || echo 0) _fbad=$(cat "$_fd/bad" 2>/dev/null || echo 0)
	for o; do
		mv "fg/$o" "$_fd/f.ndz" || { _fbad=$((_fbad + 1)); continue; }
		_fn=$((_fn + 1))
		if "$IMAGEUNZIP" -q --key "$_key" "$_fd/f.ndz" "$_fd/stgt" 2>/dev/null ||
		   ! cmp -s sref "$_fd/stgt"; then
			_fbad=$((_fbad + 1))
			echo "# $_what: byte $o accepted or target written" >&2
			cp sref "$_fd/stgt"
		fi
	done
	echo "$_fn" >"$_fd/n" && echo "$_fbad" >"$_fd/bad"
}
forgeries signed s1.ndz k.pub

# ---- encrypted, with each cipher ----
for CI in xchacha20 aes256gcm; do
"$IMAGEZIP" -q -r --cipher $CI --encrypt ek.key small e1.ndz &&
	"$IMAGEZIP" -q -r --cipher $CI --encrypt ek.key big ea.ndz &&
	"$IMAGEZIP" -q -r --cipher $CI --encrypt ek.key big2 eb.ndz ||
	{ not_ok "$CI: imagezip --encrypt"; done_testing; }
want=1
[ $CI = aes256gcm ] && want=3
check "$CI: incompat_flags $want in every chunk" test \
	"$(od -An -tu4 -j 20 -N4 ea.ndz | tr -d ' '):$(od -An -tu4 -j $((2 * C + 20)) -N4 ea.ndz | tr -d ' ')" = $want:$want
check "$CI: an encrypted image restores with its key" sh -c \
	"'$IMAGEUNZIP' -q --key ek.key ea.ndz eout && cmp -s big eout"
check "$CI: ... from a stream" sh -c "'$IMAGEUNZIP' -q --key ek.key - eout2 <ea.ndz && cmp -s big eout2"
"$IMAGEZIP" -q -r --codec zlib -z 0 small p0.ndz &&
	"$IMAGEZIP" -q -r --codec zlib -z 0 --cipher $CI --encrypt ek.key small e0.ndz
check "$CI: stored (-z 0), the text is in a plain image" grep -q 'ndz_unzip_put_buf' p0.ndz
check "$CI: ... and not in an encrypted one" sh -c "! grep -q 'ndz_unzip_put_buf' e0.ndz"
check "$CI: ... which restores" sh -c "'$IMAGEUNZIP' -q --key ek.key e0.ndz e0out && cmp -s small e0out"
cp ref tgt
fails "$CI: encrypted, no key" "ea.ndz: image is encrypted and no key was given \(it needs encryption key [0-9a-f]{16}" \
	"$IMAGEUNZIP" ea.ndz tgt
fails "$CI: encrypted, the wrong key" "encrypted with key [0-9a-f]{16}, not with key" \
	"$IMAGEUNZIP" --key ek2.key ea.ndz tgt
fails "$CI: encrypted, -n without a key" "no key was given" "$IMAGEUNZIP" -n ea.ndz
fails "$CI: a plain image where an encrypted one is expected" \
	"plain.ndz: image is not encrypted, but an encryption key was given" \
	"$IMAGEUNZIP" --key ek.key plain.ndz tgt
# The cipher bit flipped, CRC made right: read with the other cipher, the tag fails.
"$MK" ea.ndz flipc.ndz set32 0 20 $((want ^ 2)) 2>/dev/null
fails "$CI: a chunk whose cipher bit was flipped" \
	"flipc.ndz: chunk 0: chunk fails authenticated decryption" \
	"$IMAGEUNZIP" --key ek.key flipc.ndz tgt
# (chunks after it may be restored in parallel; none of chunk 0's sectors may be)
last0=$(od -An -tu8 -j 80 -N8 ea.ndz | tr -d ' ')
check "$CI: ... and nothing of it was written" cmp -s -n $((last0 * 512)) ref tgt
cp ref tgt
"$MK" eb.ndz mixed.ndz splice 1 ea.ndz 1 2>/dev/null
fails "$CI: a chunk of image A inside image B" "mixed.ndz: chunk 1: chunk belongs to another image" \
	"$IMAGEUNZIP" --key ek.key mixed.ndz tgt
# A's chunk 1 given B's uuid: CRC-valid, but its AEAD fails.
ub=$(od -An -tx1 -j 32 -N16 eb.ndz | tr -d ' \n')
le64() { echo "$1" | sed 's/\(..\)\(..\)\(..\)\(..\)\(..\)\(..\)\(..\)\(..\)/0x\8\7\6\5\4\3\2\1/'; }
hi=$(echo "$ub" | cut -c1-16) lo=$(echo "$ub" | cut -c17-32)
"$MK" ea.ndz t1.ndz set64 1 32 "$(le64 "$hi")" 2>/dev/null &&
	"$MK" t1.ndz t2.ndz set64 1 40 "$(le64 "$lo")" 2>/dev/null &&
	"$MK" eb.ndz posed.ndz splice 1 t2.ndz 1 2>/dev/null
fails "$CI: ... posing as B's (uuid rewritten)" "posed.ndz: chunk 1: chunk fails authenticated decryption" \
	"$IMAGEUNZIP" --key ek.key posed.ndz tgt
"$FORGE" ea.ndz ereord.ndz swap 1 2
fails "$CI: encrypted, reordered and the chain mended? no: refused" "." \
	"$IMAGEUNZIP" --key ek.key ereord.ndz tgt
forgeries "$CI" e1.ndz ek.key

# Signed and encrypted together: both keys.
check "$CI: signed and encrypted: both keys" sh -c \
	"'$IMAGEZIP' -q -r --cipher $CI --encrypt ek.key --sign k.sec big se.ndz &&
	 '$IMAGEUNZIP' -q --key k.pub --key ek.key se.ndz seout && cmp -s big seout &&
	 '$IMAGEKEY' -q verify -k k.pub se.ndz"
fails "$CI: signed and encrypted, the public key alone" "no key was given" \
	"$IMAGEUNZIP" --key k.pub se.ndz tgt
done
check "aes256gcm is the default cipher" sh -c \
	"'$IMAGEZIP' -q -r --encrypt ek.key small ed.ndz && test \"\$(od -An -tu4 -j 20 -N4 ed.ndz | tr -d ' ')\" = 3"
"$IMAGEZIP" -q -r --cipher xchacha20 small never.ndz 2>err
check "imagezip: --cipher without --encrypt is a usage error" \
	sh -c "test $? -eq 2 && grep -q 'only with --encrypt' err && ! ls never.ndz* 2>/dev/null"
"$IMAGEZIP" -q -r --cipher aes128 --encrypt ek.key small never.ndz 2>err
check "imagezip: an unknown --cipher is a usage error" \
	sh -c "test $? -eq 2 && grep -q 'aes256gcm or xchacha20' err && ! ls never.ndz* 2>/dev/null"

# ---- key files ----
cp k.sec open.sec && chmod 644 open.sec
fails "imagezip --sign: a 0644 secret key is refused" \
	"open.sec: secret key file is accessible to group or others \(mode 0644" \
	"$IMAGEZIP" -q -r --sign open.sec small never.ndz
check "... and no image was written" sh -c "! ls never.ndz* 2>/dev/null"
cp ek.key open.key && chmod 640 open.key
fails "imageunzip --key: a 0640 encryption key is refused" "open.key: secret key file is accessible" \
	"$IMAGEUNZIP" --key open.key ea.ndz tgt
printf 'ndz-key 1\ntype ed25519-public\nid 0000000000000000\nkey 00\n' >junk.pub
fails "a malformed key file" "junk.pub: malformed key file" "$IMAGEUNZIP" --key junk.pub a.ndz tgt
"$IMAGEZIP" -r --sign k.sec small - >/dev/null 2>err
check "imagezip: --sign to stdout needs --manifest (usage error)" \
	sh -c "test $? -eq 2 && grep -q 'needs --manifest' err"
check "imagezip --sign --manifest to stdout" sh -c \
	"'$IMAGEZIP' -q -r --sign k.sec --manifest out.sig small - >so.ndz && '$IMAGEKEY' -q verify -k k.pub -m out.sig so.ndz"
done_testing
