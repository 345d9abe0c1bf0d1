# Build, test and install the ndz disk imaging suite (imagezip, imageunzip, frisbeed, frisbee, mfrisbeed).
VERSION   = 0.2.0
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
DOCDIR   ?= $(PREFIX)/share/doc/ndz
# /etc for PREFIX=/usr (a package), PREFIX/etc otherwise
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
# the boot environment's builder (mfs/build.sh BINDIR OUTDIR, doc/ndz-mfs.7)
MFSDIR   ?= $(PREFIX)/share/ndz/mfs
DESTDIR  ?=
CFLAGS   ?= -O2 -g
LDFLAGS  ?=

WARNINGS = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
	   -Wmissing-prototypes -Wformat=2 -Wvla -Wundef -Wcast-align
ALL_CPPFLAGS = -D_GNU_SOURCE -DNDZ_VERSION='"$(VERSION)"' -Ilib -Ifs $(CPPFLAGS)
ALL_CFLAGS   = -std=gnu11 $(WARNINGS) -pthread -MMD -MP $(CFLAGS)
LIBS = -lcurl -lmicrohttpd -lisal -lntfs-3g -lext2fs -lcom_err -lsodium -lnettle -lcrypto -lzstd -ldeflate -lz -lm -pthread

# SANITIZE=address,undefined builds into build-san/ so both builds can coexist;
# `make check` also builds O=build-tsan SANITIZE=thread.
ifneq ($(SANITIZE),)
O ?= build-san
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
else
O ?= build
endif

# quiet unless V=1: one "CC file" line each; silent with make -s (the first word of
# MAKEFLAGS holds the one-letter flags)
ifneq ($(V),1)
Q = @
ifneq ($(findstring s,$(word 1,$(subst -, ,x$(MAKEFLAGS)))),)
QCC = @
QLD = @
QAR = @
else
QCC = @printf '  CC      %s\n' $<;
QLD = @printf '  LD      %s\n' $@;
QAR = @printf '  AR      %s\n' $@;
endif
endif

TOOLS    := imagezip imageunzip frisbeed frisbee mfrisbeed imagekey frisbee-upload ndzctl
PROGS    := $(foreach p,$(TOOLS),$(if $(wildcard $(p)/*.c),$(p)))
# libndz.a: lib/'s rooms (core, trust, codec, ctl, mcast, master, mserve: each a folder,
# README "Layout"); lib/cli, the programs' helpers, is libndzcli.a
LIB_SRC  := $(filter-out lib/cli/%,$(wildcard lib/*/*.c))
FS_SRC   := $(wildcard fs/*.c)
CLI_SRC  := $(wildcard lib/cli/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
# tests/helpers/*.c: one program each, but for the code they share (HLIB_SRC)
HLIB_SRC := tests/helpers/pktbuild.c
HELP_SRC := $(filter-out $(HLIB_SRC),$(wildcard tests/helpers/*.c))

obj = $(patsubst %.c,$(O)/%.o,$(1))
LIBNDZ  := $(O)/libndz.a
LIBFS   := $(O)/libndzfs.a
LIBCLI  := $(O)/libndzcli.a
LIBHELP := $(O)/libndzhelp.a
BINS    := $(addprefix $(O)/bin/,$(PROGS))
UNITS   := $(patsubst tests/unit/%.c,$(O)/tests/%,$(UNIT_SRC))
HELPERS := $(patsubst tests/helpers/%.c,$(O)/tests/helpers/%,$(HELP_SRC))

# Keep objects of the test programs between builds.
.SECONDARY:

.PHONY: all tests check check-fast demo install uninstall clean fuzz bench mfs check-vm check-ceph
all: $(BINS)
tests: $(UNITS) $(HELPERS)

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(QCC)$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# the page the master serves is built in (.incbin), so its object depends on it
$(O)/lib/mserve/page.o: lib/mserve/page.html

$(LIBNDZ): $(call obj,$(LIB_SRC))
	$(QAR)rm -f $@ && ar rcs $@ $^
$(LIBFS): $(call obj,$(FS_SRC))
	$(QAR)rm -f $@ && ar rcs $@ $^
$(LIBCLI): $(call obj,$(CLI_SRC))
	$(QAR)rm -f $@ && ar rcs $@ $^
$(LIBHELP): $(call obj,$(HLIB_SRC))
	$(QAR)rm -f $@ && ar rcs $@ $^

define prog_rule
$(O)/bin/$(1): $(call obj,$(wildcard $(1)/*.c)) $(LIBCLI) $(LIBFS) $(LIBNDZ)
	@mkdir -p $$(dir $$@)
	$$(QLD)$$(CC) $$(ALL_CFLAGS) $$(LDFLAGS) -o $$@ $$^ $$(LIBS)
endef
$(foreach p,$(PROGS),$(eval $(call prog_rule,$(p))))

$(O)/tests/test_%: $(O)/tests/unit/test_%.o $(LIBCLI) $(LIBFS) $(LIBNDZ)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ -lcmocka $(LIBS)

$(O)/tests/helpers/%: $(O)/tests/helpers/%.o $(LIBHELP) $(LIBCLI) $(LIBFS) $(LIBNDZ)
	@mkdir -p $(dir $@)
	$(QLD)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)

# The whole suite from scratch: dependencies, a plain and a sanitized build, every test;
# then ThreadSanitizer on the tests that exercise the threaded code. What only the tests
# need is installed while the three builds run; the ThreadSanitizer build makes only
# the unit tests tests/run.sh runs under it (TSAN_UNITS there; test_err its probe).
TSAN_UNITS := test_zip test_unzip test_io test_pool test_err
check:
	@sh tests/install-deps.sh --build
	$(Q)rm -rf build build-san build-tsan && mkdir -p build
	$(Q)sh tests/install-deps.sh >build/install-deps.log 2>&1 & deps=$$!; \
	$(MAKE) --no-print-directory -j2 all tests && \
	$(MAKE) --no-print-directory -j2 SANITIZE=address,undefined all tests && \
	$(MAKE) --no-print-directory -j2 O=build-tsan SANITIZE=thread all \
		$(addprefix build-tsan/tests/,$(TSAN_UNITS)) $(patsubst $(O)/%,build-tsan/%,$(HELPERS)); \
	rc=$$?; wait $$deps; drc=$$?; cat build/install-deps.log; [ $$rc = 0 ] && [ $$drc = 0 ]
	$(Q)sh tests/run.sh build build-san build-tsan

# The plain build's suite only, without reinstalling or rebuilding from scratch.
check-fast: all tests
	$(Q)sh tests/run.sh $(O)

# The main job end to end on a built-in sample (installs what it needs first).
demo:
	@sh tests/install-deps.sh
	$(Q)$(MAKE) --no-print-directory -j2 all
	$(Q)sh tests/demo.sh $(O)

# The boot environment (doc/ndz-mfs.7): $(O)/mfs/vmlinuz and initramfs.cpio.gz, from
# Debian's kernel and busybox-static (fetched with apt-get download) and our programs.
mfs: all
	$(Q)sh mfs/build.sh -c $(O)/mfs/cache $(O)/bin $(O)/mfs

# The slow virtual-machine cases (several VMs, failures); vm_reload.sh is in `make check`
# (the plain build's; here in a sanitized one too).
check-vm: all tests
	$(Q)sh tests/vm/run.sh $(O)

# The object store against a real single-node Ceph (mon, OSD, radosgw, started and removed
# by the tests); tests/cli/site_store.sh, its short case, is in `make check` (plain build).
check-ceph: all tests
	$(Q)sh tests/ceph/run.sh $(O)

bench: all
	$(Q)sh bench/run.sh $(O)

fuzz:
	$(Q)sh tests/fuzz/build.sh

# Everything the man pages refer to: the programs, their man pages and bash completions,
# the documents (FORMAT.md, PROTOCOL.md, PXE.md, HTTP.md, SITES.md and doc/pxe/), the boot environment's
# builder, the master's systemd unit and system user, and SYSCONFDIR/ndz with a commented
# configuration (never overwritten: an administrator's edits stay). Enabling the unit is
# the administrator's choice.
DOCS   := README.md doc/FORMAT.md doc/PROTOCOL.md doc/IMPLEMENTATION.md doc/PXE.md doc/FILESYSTEMS.md \
	  doc/HTTP.md doc/SITES.md \
	  doc/mfrisbeed.conf.example
MFS    := mfs/build.sh mfs/init mfs/udhcpc.script
MANS   := $(wildcard doc/*.[1-8])
unit_subst = sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g'

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR)/pxe/pxelinux.cfg \
		$(DESTDIR)$(SYSCONFDIR)/ndz $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(COMPLETIONDIR) $(DESTDIR)$(MFSDIR)
	install -m 755 $(BINS) $(DESTDIR)$(BINDIR)/
	for m in $(MANS); do s=$${m##*.}; install -d $(DESTDIR)$(MANDIR)/man$$s && \
		install -m 644 "$$m" $(DESTDIR)$(MANDIR)/man$$s/ || exit 1; done
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	install -m 644 doc/pxe/boot.ipxe doc/pxe/dnsmasq.conf doc/pxe/dnsmasq-lab.conf \
		$(DESTDIR)$(DOCDIR)/pxe/
	install -m 644 doc/pxe/pxelinux.cfg/default $(DESTDIR)$(DOCDIR)/pxe/pxelinux.cfg/
	install -m 755 $(MFS) $(DESTDIR)$(MFSDIR)/
	for p in $(PROGS); do install -m 644 completion/ndz $(DESTDIR)$(COMPLETIONDIR)/$$p || exit 1; done
	$(unit_subst) doc/mfrisbeed.service.in >$(DESTDIR)$(SYSTEMDUNITDIR)/mfrisbeed.service
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/mfrisbeed.service
	install -m 644 doc/ndz.sysusers $(DESTDIR)$(SYSUSERSDIR)/ndz.conf
	[ -e $(DESTDIR)$(SYSCONFDIR)/ndz/mfrisbeed.conf ] || \
		install -m 644 doc/mfrisbeed.conf $(DESTDIR)$(SYSCONFDIR)/ndz/mfrisbeed.conf

# Leaves SYSCONFDIR/ndz/mfrisbeed.conf when it was edited (it differs from ours).
uninstall:
	for p in $(PROGS); do rm -f $(DESTDIR)$(BINDIR)/$$p $(DESTDIR)$(COMPLETIONDIR)/$$p; done
	for m in $(MANS); do rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m#doc/}; done
	for d in $(DOCS) $(MFS); do rm -f $(DESTDIR)$(DOCDIR)/$${d##*/} $(DESTDIR)$(MFSDIR)/$${d##*/}; done
	rm -rf $(DESTDIR)$(DOCDIR)/pxe
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/mfrisbeed.service $(DESTDIR)$(SYSUSERSDIR)/ndz.conf
	cmp -s doc/mfrisbeed.conf $(DESTDIR)$(SYSCONFDIR)/ndz/mfrisbeed.conf && \
		rm -f $(DESTDIR)$(SYSCONFDIR)/ndz/mfrisbeed.conf; true
	-rmdir $(DESTDIR)$(SYSCONFDIR)/ndz $(DESTDIR)$(MFSDIR) $(DESTDIR)$(DOCDIR) 2>/dev/null

clean:
	rm -rf build build-san build-tsan

-include $(shell find $(O) -name '*.d' 2>/dev/null)
