#!/bin/sh
# The object store's short real case for `make check`: a real single-node Ceph, an upload
# put in it, a site master fetching the image from it for three multicast clients
# (tests/ceph/site_store.sh with CEPH_SHORT=1; `make check-ceph` runs the full set).
# Once in `make check`, in the plain build: a sanitized build's Ceph cases run in
# `make check-ceph SANITIZE=...`, the full set.
if [ "${NDZ_SANITIZED:-0}" = 1 ] && [ "${NDZ_SLOW:-0}" != 1 ]; then
	echo "skip: the Ceph case runs once in make check, in the plain build (make check-ceph SANITIZE=... runs the full set here)"
	exit 77
fi
CEPH_SHORT=1 exec sh "$NDZ_TOP/tests/ceph/site_store.sh"
