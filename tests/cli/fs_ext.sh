#!/bin/sh
# ext2/3/4 made by mke2fs -d with every current feature: imagezip keeps only the
# allocated blocks; the restore onto a patterned target checks clean and reads back.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mke2fs e2fsck debugfs gzip

SIZE=$((32 * MIB))
mkfiles "$T/src" 40 600
# a file list with every fourth file deleted after the copy: stale data in free space
keep=""; rm_cmds="$T/rm.cmds"; : >"$rm_cmds"
i=1; while [ $i -le 40 ]; do
	if [ $((i % 4)) = 0 ]; then echo "rm f$i" >>"$rm_cmds"; else keep="$keep f$i"; fi
	i=$((i + 1))
done

run() {	# run NAME MKE2FS-ARGS...
	name=$1; shift
	img="$T/$name.img"; ndz="$T/$name.ndz"; tgt="$T/$name.tgt"
	dirty "$img" $SIZE
	if ! mke2fs -q -F -E nodiscard "$@" -d "$T/src" "$img" >"$T/mk.log" 2>&1; then
		not_ok "$name: mke2fs $*"; cat "$T/mk.log"; return
	fi
	debugfs -w -f "$rm_cmds" "$img" >/dev/null 2>&1
	check "$name: source is clean" quiet e2fsck -fn "$img"
	if ! "$IMAGEZIP" "$img" "$ndz" 2>"$T/err"; then
		not_ok "$name: imagezip"; cat "$T/err"; return
	fi
	check "$name: imagezip says nothing" test ! -s "$T/err"
	pattern "$tgt" $SIZE
	check "$name: imageunzip" "$IMAGEUNZIP" "$ndz" "$tgt"
	if e2fsck -fn "$tgt" >"$T/fsck" 2>&1; then ok "$name: e2fsck -fn clean"
	else not_ok "$name: e2fsck -fn"; head -20 "$T/fsck"; fi
	rm -rf "$T/out"; mkdir "$T/out"
	debugfs -R "rdump / $T/out" "$tgt" >/dev/null 2>&1
	# shellcheck disable=SC2086
	check "$name: every file reads back identical" same_files "$T/src" "$T/out" $keep
	check "$name: deleted files stay deleted" test ! -e "$T/out/f4"
	smaller "$ndz" "$img" "$(used_bytes "$img")" "$name"
	rm -f "$img" "$ndz" "$tgt"
}

run ext4-4k -t ext4 -b 4096 -g 2048
run ext4-1k -t ext4 -b 1024
run ext4-bigalloc -t ext4 -b 4096 -O bigalloc -C 16384
if [ "${NDZ_SANITIZED:-0}" != 1 ]; then
	run ext4-2k-metabg -t ext4 -b 2048 -O meta_bg,^resize_inode
	run ext4-uninit-bg -t ext4 -b 4096 -g 2048 -O ^metadata_csum,uninit_bg
	run ext3 -t ext3 -b 1024
	run ext2 -t ext2 -b 4096
fi

# A cleanly closed journal's body is history: imaged as zeros, restored as zeros (not
# as the target's old bytes, which recovery could take for later transactions), its
# superblock as it was; --keep-journal keeps the body. debugfs writes a transaction of
# 1500 random blocks (into free space) and replays it, so the body holds them.
jimg="$T/j.img"
dirty "$jimg" $SIZE
mke2fs -q -F -E nodiscard -t ext4 -b 1024 "$jimg" >/dev/null 2>&1
head -c $((1500 * 1024)) /dev/urandom >"$T/jblk"
printf 'jo\njw -b 30000-31499 %s\njc\n' "$T/jblk" >"$T/jcmd"
debugfs -w -f "$T/jcmd" "$jimg" >/dev/null 2>&1
"$IMAGEZIP" "$jimg" "$T/jrec.ndz" 2>"$T/err"
check "journal to replay: taken raw, with a warning" grep -q "journal needs recovery" "$T/err"
debugfs -w -R jr "$jimg" >/dev/null 2>&1
check "replayed journal: source clean" quiet e2fsck -fn "$jimg"
# the journal's one extent: logical 0-(n-1) at physical a-b (1 KiB blocks)
ext=$(debugfs -R "stat <8>" "$jimg" 2>/dev/null | sed -n 's/^(0-\([0-9]*\)):\([0-9]*\)-[0-9]*$/\1 \2/p')
jlast=${ext% *} jstart=${ext#* }
jbody() { dd if="$1" bs=1024 skip=$((jstart + 1)) count="$jlast" status=none; }
if [ -z "$ext" ]; then
	not_ok "journal in one extent"
else
	check "source journal body holds the transaction" \
		[ "$(jbody "$jimg" | tr -d '\000' | wc -c)" -gt $((1400 * 1024)) ]
	"$IMAGEZIP" -i "$jimg" >"$T/info" 2>&1
	check "-i counts the journal body as zeroed" \
		grep -q "zeroed $(((jlast) * 1024)) " "$T/info"
	"$IMAGEZIP" "$jimg" "$T/jz.ndz" && "$IMAGEZIP" --keep-journal "$jimg" "$T/jk.ndz"
	check "the zeroed journal makes the image smaller by the transaction" \
		[ "$(fsize "$T/jz.ndz")" -le $(($(fsize "$T/jk.ndz") - MIB)) ]
	for v in jz jk; do
		pattern "$T/$v.tgt" $SIZE
		check "$v: imageunzip" "$IMAGEUNZIP" "$T/$v.ndz" "$T/$v.tgt"
		check "$v: e2fsck -fn clean" quiet e2fsck -fn "$T/$v.tgt"
		check "$v: journal superblock as in the source" sh -c \
			"cmp -s -n 1024 -i $((jstart * 1024)) '$jimg' '$T/$v.tgt'"
	done
	check "jz: the journal body is restored as zeros" \
		[ "$(jbody "$T/jz.tgt" | tr -d '\000' | wc -c)" = 0 ]
	jbody "$jimg" >"$T/jb.src"; jbody "$T/jk.tgt" >"$T/jb.tgt"
	check "jk: --keep-journal restores the body as it was" cmp -s "$T/jb.src" "$T/jb.tgt"
fi
rm -f "$T"/j*

# -i prints what was found and writes nothing
dirty "$T/i.img" $SIZE
mke2fs -q -F -E nodiscard -t ext4 -d "$T/src" "$T/i.img" >/dev/null 2>&1
before=$(ls "$T" | grep -vx info)
"$IMAGEZIP" -i "$T/i.img" >"$T/info" 2>&1
check "-i names the filesystem and its free bytes" grep -q "ext \[ext4, .*\] used .* free" "$T/info"
check "-i writes no image (nor index)" [ "$(ls "$T" | grep -vx info)" = "$before" ]
# -F: a huge minimum free run turns the image raw-sized
"$IMAGEZIP" -F 64M "$T/i.img" "$T/f.ndz" 2>/dev/null
"$IMAGEZIP" "$T/i.img" "$T/n.ndz" 2>/dev/null
check "-F 64M keeps the free runs" test "$(fsize "$T/f.ndz")" -gt "$(fsize "$T/n.ndz")"
# -S 0=raw is the same as -R 0
"$IMAGEZIP" -R 0 "$T/i.img" "$T/r.ndz" 2>/dev/null
check "-R 0 takes it raw" test "$(fsize "$T/r.ndz")" -ge $((SIZE * 3 / 4))
done_testing
