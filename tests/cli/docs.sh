#!/bin/sh
# The docs agree with the code: every option a program's --help lists is in its man
# page, every option a man page documents (its OPTIONS section) is in --help; the
# README names every program and every room of lib/; all docs name the same
# configuration path; FORMAT.md and PROTOCOL.md link IMPLEMENTATION.md, which is
# installed; the bash completion offers every option.
. "$NDZ_TOP/tests/lib.sh"
D=$NDZ_TOP/doc
# man_text PAGE: the page as text without roff escapes (\-, \fB...)
man_text() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(em/-/g' "$1"; }
# help_opts PROG: the options --help lists at the start of its lines (-x and --long)
help_opts() {
	"$NDZ_BIN/$1" --help 2>&1 | grep -E '^ +-' |
		awk '{ for (i = 1; i <= 2 && i <= NF; i++) { w = $i; sub(/,$/, "", w); sub(/=.*/, "", w)
			if (w ~ /^--?[A-Za-z0-9]/) print w } }' | sort -u
}
# man_opts PAGE: the options the OPTIONS section's tags (the line after .TP) define
man_opts() {
	man_text "$1" | awk '/^\.SH/ { opt = ($0 ~ /OPTIONS|COMMANDS/) } opt && tag { print } { tag = opt && /^\.TP/ }' |
		grep -oE '(^|[ ,"])--?[A-Za-z0-9][a-z0-9-]*' | sed 's/^[ ,"]//' | sort -u
}
# lacking LIST TEST...: the lines of file LIST for which TEST... LINE fails, each after a space
lacking() {
	_list=$1
	shift
	_out=""
	while read -r _o; do
		"$@" "$_o" || _out="$_out $_o"
	done <"$_list"
	echo "$_out"
}
# in_text FILE OPTION: OPTION stands in FILE as a word of its own
in_text() { grep -qE -- "(^|[^A-Za-z0-9-])$2([^A-Za-z0-9-]|\$)" "$1"; }
# in_list FILE OPTION: OPTION is a line of FILE
in_list() { grep -qx -- "$2" "$1"; }
for pm in imagezip.1 imageunzip.1 imagekey.1 frisbee.8 frisbeed.8 mfrisbeed.8 frisbee-upload.8 ndzctl.8; do
	p=${pm%.*}
	[ -x "$NDZ_BIN/$p" ] || { not_ok "$p not built"; continue; }
	help_opts "$p" >"$T/$p.help"
	man_text "$D/$pm" >"$T/$p.man"
	man_opts "$D/$pm" >"$T/$p.manopts"
	missing=$(lacking "$T/$p.help" in_text "$T/$p.man")
	check "$p: every option of --help ($(wc -l <"$T/$p.help")) is in $pm${missing:+; missing:$missing}" \
		[ -z "$missing" ]
	extra=$(lacking "$T/$p.manopts" in_list "$T/$p.help")
	check "$p: every option $pm documents ($(wc -l <"$T/$p.manopts")) is in --help${extra:+; not there:$extra}" \
		[ -z "$extra" ]
done

for p in imagezip imageunzip frisbeed frisbee mfrisbeed frisbee-upload imagekey ndzctl; do
	check "README's program table has $p" grep -q "^| \`$p\` | " "$NDZ_TOP/README.md"
done
bad=$(grep -rln '/etc/mfrisbeed\.conf' "$NDZ_TOP/README.md" "$D" "$NDZ_TOP/mfs" 2>/dev/null | tr '\n' ' ')
check "no doc names /etc/mfrisbeed.conf: the configuration is /etc/ndz/mfrisbeed.conf${bad:+ ($bad)}" \
	[ -z "$bad" ]
check "PXE.md, mfrisbeed(8), the unit and README agree on /etc/ndz/mfrisbeed.conf" \
	sh -c "grep -q /etc/ndz/mfrisbeed.conf '$D/PXE.md' && grep -q '/etc/ndz/mfrisbeed.conf' '$D/mfrisbeed.8' &&
		grep -q '@SYSCONFDIR@/ndz/mfrisbeed.conf' '$D/mfrisbeed.service.in' &&
		grep -q /etc/ndz/mfrisbeed.conf '$NDZ_TOP/README.md'"

# no man page loses text: a line starting with ' or . is a roff request, so one that
# is prose (a quote, a file name) vanishes; every such line must be a known request
# or macro. No control character but tab and newline; groff, when here, warns of nothing.
REQ="TH SH SS TP PP P LP IP HP B I BR RB BI IB IR RI SM SB nf fi br sp RS RE PD in ti ad na ne EX EE UR UE MT ME ft ce hy nh ds de nr if ie el so TS TE ta"
for pm in "$D"/*.[1-8]; do
	bad=$(grep -n "^[.']" "$pm" | while IFS= read -r l; do
		r=${l#*:}; r=${r#?}; r=${r%% *}
		case $r in '\"'*) continue ;; esac
		case " $REQ " in *" $r "*) ;; *) printf ' %s' "${l%%:*}" ;; esac
	done)
	check "${pm##*/}: every line starting with ' or . is a request${bad:+; not at lines:$bad}" [ -z "$bad" ]
	check "${pm##*/}: no control characters (such as a form feed where a font escape was meant)" \
		sh -c "! LC_ALL=C grep -q \"\$(printf '[\001-\010\013\014\016-\037]')\" '$pm'"
	if command -v groff >/dev/null; then
		w=$(groff -man -ww -z "$pm" 2>&1 | head -n 2 | tr '\n' ' ')
		check "${pm##*/}: groff -ww warns of nothing${w:+ ($w)}" [ -z "$w" ]
	fi
done
# README's list of manual pages (its paragraph "Manual pages: ...") names every page
sed -n '/^Manual pages:/,/^$/p' "$NDZ_TOP/README.md" >"$T/manlist"
missing=""
for pm in "$D"/*.[1-8]; do
	grep -q "\`doc/${pm##*/}\`" "$T/manlist" || missing="$missing ${pm##*/}"
done
check "README names every manual page${missing:+; missing:$missing}" [ -z "$missing" ]

# README says how to get the build dependencies, and names each of debian/control's
deps=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$NDZ_TOP/debian/control" | sed 's/^Build-Depends://' |
	tr ',' '\n' | sed 's/[(].*//; s/^ *//; s/ *$//' | grep -v '^$' | grep -v '^Standards' |
	grep -v '^debhelper-compat$\|^dh-sequence-')
missing=""
for d in $deps; do grep -q "$d" "$NDZ_TOP/README.md" || missing="$missing $d"; done
check "README explains the build dependencies (apt-get build-dep, each of debian/control's)${missing:+; missing:$missing}" \
	sh -c "grep -q 'apt-get build-dep' '$NDZ_TOP/README.md' && [ -z '$missing' ]"

# PXE.md serves a package user as well as a source checkout: the installed builder,
# the installed examples, next to make mfs and doc/pxe/
check "PXE.md names the installed builder and examples, not only make mfs and doc/pxe/" \
	sh -c "grep -q '/usr/share/ndz/mfs/build.sh /usr/bin ' '$D/PXE.md' &&
		grep -q '/usr/share/doc/ndz-mfs/pxe/' '$D/PXE.md' && grep -q 'make mfs' '$D/PXE.md'"
check "PXE.md's commands copy examples from where the packages put them" \
	sh -c "grep -q '^cp /usr/share/doc/ndz-mfs/pxe/dnsmasq-lab.conf ' '$D/PXE.md'"

# the specs send implementation notes to IMPLEMENTATION.md, which is installed; the
# README's layout names every room of lib/
for f in FORMAT.md PROTOCOL.md; do
	check "$f links IMPLEMENTATION.md" grep -q '(IMPLEMENTATION.md)' "$D/$f"
done
check "make install's documents include doc/IMPLEMENTATION.md" \
	grep -q '^DOCS .*doc/IMPLEMENTATION\.md' "$NDZ_TOP/Makefile"
missing=""
for r in "$NDZ_TOP"/lib/*/; do
	r=${r%/}; r=lib/${r##*/}
	grep -q "^$r/ " "$NDZ_TOP/README.md" || missing="$missing $r"
done
check "README's layout names every room of lib/${missing:+; missing:$missing}" [ -z "$missing" ]

# the completion offers each program's long options (from its --help)
if command -v bash >/dev/null; then
	for p in imagezip imageunzip frisbeed frisbee mfrisbeed frisbee-upload imagekey ndzctl; do
		got=$(PATH="$NDZ_BIN:$PATH" bash -c '. "$1/completion/ndz"
			if [ "$2" = imagekey ]; then COMP_WORDS=("$2" sign --); else COMP_WORDS=("$2" --); fi
			COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _ndz "$2"; printf "%s\n" "${COMPREPLY[@]}"' \
			_ "$NDZ_TOP" "$p" | sort -u)
		want=$(grep -- '^--' "$T/$p.help" 2>/dev/null || help_opts "$p" | grep -- '^--')
		check "bash completion of $p -- offers its $(echo "$want" | wc -l) long options" \
			[ "$got" = "$want" ]
	done
fi
done_testing
