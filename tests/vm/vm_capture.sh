#!/bin/sh
# Capture mode of the boot environment on real virtual machines: a VM whose disk holds
# an ext4 made here boots with ndz.mode=capture, images its disk (ndzctl node: the
# capture job) and uploads it to mfrisbeed in the namespace; the stored image must restore to the disk
# byte for byte, and a second VM reloads it through the master. Meanwhile another VM
# captures to a name it may not upload to (refused with the master's reason, powered
# off, nothing stored) and a third's capture fails on an option (nothing stored). The
# capture is one process, ndzctl node: its one error is the reason.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/vm/vmlib.sh"
# a 48 MiB ext4 with 12 MiB of files; its free space is zeros
vm_begin fs1 48
cp "$T/fs1.src" "$T/cap.disk" && cp "$T/fs1.src" "$T/deny.disk" && cp "$T/fs1.src" "$T/bad.disk" && cp "$T/fs1.ndz" "$T/fixed.ndz" ||
	{ not_ok "copy the disks"; done_testing; }
mkdir -p "$T/up" "$T/run"
# uploads of new names from the LAN into $T/up; "fixed" has no upload list: nobody may
# replace it
cat >"$T/m.conf" <<CONF
pool 239.192.79.0/29
ports 5300-5307
idle-timeout 30
upload-dir $T/up allow 10.77.0.0/24 upload 10.77.0.0/24
image fixed $T/fixed.ndz allow 10.77.0.0/24
CONF
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" \
	2>"$T/master.log" &
VM_PIDS="$VM_PIDS $!"
common="ndz.mode=capture ndz.master=$VM_SRV ndz.after=poweroff ndz.onfail=poweroff ndz.retries=0 ndz.timeout=20"
t0=$(date +%s)
VM_TIMEOUT=150 vm_start cap "$T/cap.disk" "ndz.image=cap $common"
VM_TIMEOUT=150 vm_start deny "$T/deny.disk" "ndz.image=fixed $common"
# imagezip fails at once (an option it does not know): nothing is sent
VM_TIMEOUT=150 vm_start bad "$T/bad.disk" "ndz.image=bad ndz.opts=--no-such-option $common"
vm_wait cap; vm_wait deny; vm_wait bad
secs=$(( $(date +%s) - t0 ))

res=$(vm_result cap)
check "capture: the VM reports success ($res)" \
	sh -c "echo \"\$1\" | grep -q \"^ok: /dev/vda captured as image 'cap' of master $VM_SRV in \"" _ "$res"
check "capture: the VM powered itself off in $secs s (qemu exit $(cat "$T/cap.qrc"))" \
	sh -c "[ \"$(cat "$T/cap.qrc")\" = 0 ] && grep -q 'reboot: Power down' '$T/cap.con'"
check "capture: the console shows the master's verdict (stored)" \
	grep -q "stored as image 'cap' on $VM_SRV" "$T/cap.con"
check "capture: the VM's disk is unchanged" cmp -s "$T/fs1.src" "$T/cap.disk"
check "the master stored the upload, nothing else" \
	sh -c "[ \"\$(ls -A '$T/up' | tr '\n' ' ')\" = 'cap.ndz ' ]"
# (a) restore the uploaded image and a local imagezip of the same disk onto 0xa5 files
a5() { head -c $(( 48 * 1024 * 1024 )) /dev/zero | tr '\0' '\245' >"$1"; }
a5 "$T/up.out" && a5 "$T/local.out"
"$IMAGEUNZIP" -q "$T/up/cap.ndz" "$T/up.out" 2>"$T/unzip.err"; rc=$?
"$IMAGEUNZIP" -q "$T/fs1.ndz" "$T/local.out" 2>>"$T/unzip.err"; rc2=$?
check "the uploaded image restores onto 0xa5 exactly as a local imagezip of the disk does" \
	sh -c "[ $rc = 0 ] && [ $rc2 = 0 ] && cmp -s '$T/up.out' '$T/local.out'"
check "... and is not just the 0xa5 file (the image wrote something)" \
	sh -c "! cmp -s '$T/up.out' '$T/fs1.src' && ! head -c 1048576 '$T/up.out' | tr -d '\245' | cmp -s - /dev/null"
"$IMAGEUNZIP" -q -z "$T/up/cap.ndz" "$T/up.z" 2>>"$T/unzip.err"; rc=$?
check "imageunzip -z of the uploaded image is the disk, byte for byte" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/fs1.src' '$T/up.z'"
check "e2fsck -fn finds the restore clean" sh -c "e2fsck -fn '$T/up.out' >'$T/fsck.log' 2>&1"

res=$(vm_result deny)
check "capture to a name the VM may not upload to: the master's reason ($res)" \
	sh -c "case \"\$1\" in \"failed: capture: master $VM_SRV:3563: image 'fixed': access denied\"*) exit 0 ;; esac; exit 1" sh "$res"
check "... powered off (ndz.onfail), no success line" \
	sh -c "[ \"$(cat "$T/deny.qrc")\" = 0 ] && grep -q 'reboot: Power down' '$T/deny.con' && ! grep -q '^NDZ-RESULT: ok' '$T/deny.con'"
check "... nothing stored, the served image unchanged" \
	sh -c "cmp -s '$T/fs1.ndz' '$T/fixed.ndz' && ! ls -A '$T/up' | grep -qv '^cap.ndz$'"

res=$(vm_result bad)
check "a capture option it does not know: the reason ($res)" \
	sh -c "echo \"\$1\" | grep -q \"^failed: ndzctl: --opts: '--no-such-option' is not an option\"" _ "$res"
check "... powered off, nothing stored under its name" \
	sh -c "[ \"$(cat "$T/bad.qrc")\" = 0 ] && grep -q 'reboot: Power down' '$T/bad.con' && [ ! -e '$T/up/bad.ndz' ]"

# (b) a second VM with a garbage disk reloads the captured image from the master
vm_disk "$T/re.disk" 48
vm_run 150 re "$T/re.disk" \
	"ndz.master=$VM_SRV ndz.image=cap ndz.zero=1 ndz.after=poweroff ndz.onfail=poweroff ndz.retries=0 ndz.timeout=20"
res=$(vm_result re)
check "reload of the captured image: the VM reports success in $VM_SECS s ($res)" \
	sh -c "echo \"\$1\" | grep -q '^ok: '" _ "$res"
check "... the reloaded disk is the captured one, byte for byte" cmp -s "$T/fs1.src" "$T/re.disk"

b=$(vm_time cap 'capturing') d=$(sed -n 's/^NDZ-RESULT: ok: .* in \([0-9.]*\) s.*/\1/p' "$T/cap.con" | tr -d '\r')
echo "# capture: boot to imagezip ${b:-?} s, imagezip + upload ${d:-?} s (guest clock); $VM_ACCEL"
if [ "$_failed" != 0 ]; then
	tail -n 5 "$T/master.log" 2>/dev/null | sed 's/^/# master: /'
	for v in cap deny bad re; do
		echo "# console of $v:"; tr -d '\r' <"$T/$v.con" | grep -v '^\[' | tail -n 20 | sed 's/^/#   /'
	done
fi
done_testing
