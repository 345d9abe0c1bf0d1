#!/bin/sh
# The object store's short real case for `make check`: a real single-node Ceph, an upload
# put in it, a site master fetching the image from it for three multicast clients
# (tests/ceph/site_store.sh with CEPH_SHORT=1; `make check-ceph` runs the full set).
CEPH_SHORT=1 exec sh "$NDZ_TOP/tests/ceph/site_store.sh"
