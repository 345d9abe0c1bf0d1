#!/usr/bin/env python3
# bench/seed-pcap.py OUT.pcap IN.pcap NCHUNKS [T0FILE]: where a server's bytes went, from a
# capture that bench/seed.sh BENCH_PCAP=DIR keeps (DIR/multi.R.pcap, both directions; pass
# it as OUT and IN). Splits the server's datagrams by type, counts each 32-byte granule of
# each chunk sent (BLOCK, BLOCKS, SPAN: doc/PROTOCOL.md's layouts), and attributes every
# re-sent granule by the requests the server heard between its two sends (a client's first
# ask, a re-ask, none: queued twice). Chunks from NCHUNKS + the manifest's chunks on are the
# index's. T0FILE (DIR/multi.R.t0): the clients' start, for the times. The server is
# 10.77.0.1 (tests/netns.sh's LAN). Written for issue 32's 8-client row (bench/seed-results.txt).
import struct, sys, collections

def pcap(path):
    with open(path, 'rb') as f:
        h = f.read(24)
        magic = struct.unpack('<I', h[:4])[0]
        nano = magic == 0xa1b23c4d
        while True:
            r = f.read(16)
            if len(r) < 16:
                return
            s, us, incl, orig = struct.unpack('<IIII', r)
            d = f.read(incl)
            yield s + us / (1e9 if nano else 1e6), orig, d

def udp(d):
    if len(d) < 42 or d[12:14] != b'\x08\x00':
        return None
    ihl = (d[14] & 15) * 4
    src = '.'.join(str(x) for x in d[26:30])
    ulen = struct.unpack('>H', d[14 + ihl + 4:14 + ihl + 6])[0]
    p = d[14 + ihl + 8:]
    return src, ulen - 8, p

out, inp, nch = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = float(open(sys.argv[4]).read()) if len(sys.argv) > 4 else None
IDX0 = nch + -(-(128 + 32 * nch) // 1048576)
G = 32
SRV = '10.77.0.1'
# sends[chunk] = list of (t, first_granule, ngran, kind)
sends = []
wire = collections.Counter()
npk = collections.Counter()
other_bytes = 0
for t, orig, d in pcap(out):
    u = udp(d)
    if not u or u[2][:4] != b'NDZP':
        other_bytes += orig
        continue
    src, plen, p = u
    if src != SRV:
        continue
    typ = p[5]
    wire[typ] += orig
    npk[typ] += 1
    if typ in (4, 12, 13):
        chunk = struct.unpack('<I', p[12:16])[0]
        if typ == 4:
            off, ln = struct.unpack('<H', p[16:18])[0] * 1024, 1024
        elif typ == 12:
            off, ln = struct.unpack('<H', p[16:18])[0] * 1024, plen - 20
        else:
            off, ln = struct.unpack('<I', p[16:20])[0], plen - 20
        sends.append((t, chunk, off // G, ln // G, orig))
reqs = collections.defaultdict(list)   # (chunk) -> [(t, src, set(blocks), type)]
nreq = collections.Counter()
for t, orig, d in pcap(inp):
    u = udp(d)
    if not u or u[2][:4] != b'NDZP':
        continue
    src, plen, p = u
    if src == SRV:
        continue
    typ = p[5]
    nreq[typ] += 1
    if typ == 5:
        chunk, first, cnt = struct.unpack('<IHH', p[16:24])
        reqs[chunk].append((t, src, set(range(first, first + cnt)), typ))
    elif typ == 6:
        chunk = struct.unpack('<I', p[16:20])[0]
        bm = p[24:152]
        bl = set(b for b in range(min(1024, len(bm) * 8)) if bm[b // 8] >> (b % 8) & 1)
        reqs[chunk].append((t, src, bl, typ))
    elif typ in (9, 15):
        chunk = struct.unpack('<I', p[16:20])[0]
        if typ == 15:
            first, cnt = struct.unpack('<HH', p[20:24])
            bl = set(range(first, first + cnt))
        else:
            bl = set(range(1024))
        reqs[chunk].append((t, src, bl, typ))
if t0 is None:
    t0 = sends[0][0] if sends else 0
print('server datagrams by type (type: count, wire bytes):',
      {k: (npk[k], wire[k]) for k in sorted(npk)}, 'non-NDZ', other_bytes)
print('received by srv by type:', dict(sorted(nreq.items())))
print('index chunks from', IDX0)
# per granule send counts, and the re-sends attributed
cnt = collections.defaultdict(lambda: [0] * (1048576 // G))
last = collections.defaultdict(dict)   # chunk -> granule -> time of last send
first_t = collections.defaultdict(dict)
tot_g = 0
exc = collections.Counter()            # cause -> granules
exc_by_chunk = collections.Counter()
exc_time = collections.Counter()       # second since t0 -> granules re-sent
client_first = {}                      # first request time by src
for ch, rl in reqs.items():
    for (t, src, bl, ty) in rl:
        client_first[src] = min(client_first.get(src, 1e18), t)
def cause(ch, g, tprev, tnow):
    b = g * G // 1024
    # requests covering b between the previous send and this one
    trig = [(t, s) for (t, s, bl, ty) in reqs.get(ch, []) if tprev < t <= tnow and b in bl]
    if not trig:
        return 'no request between (server repeat/queued twice)'
    kinds = set()
    for (t, s) in trig:
        before = any(t2 <= tprev and s2 == s and b in bl2 for (t2, s2, bl2, ty2) in reqs.get(ch, []))
        kinds.add('re-ask (asked before the last send)' if before else 'first ask after the last send')
    if len(kinds) > 1:
        return 'both'
    return kinds.pop()
# index reqs per chunk sorted
for ch in reqs:
    reqs[ch].sort(key=lambda x: x[0])
for (t, ch, g0, ng, orig) in sends:
    c = cnt[ch]
    for g in range(g0, min(g0 + ng, len(c))):
        tot_g += 1
        if c[g]:
            k = ('index ' if ch >= IDX0 else 'image ') + cause(ch, g, last[ch][g], t)
            exc[k] += 1
            exc_by_chunk[ch] += 1
            exc_time[int(t - t0)] += 1
        c[g] += 1
        last[ch][g] = t
uni = sum(1 for ch in cnt for x in cnt[ch] if x)
uni_idx = sum(1 for ch in cnt if ch >= IDX0 for x in cnt[ch] if x)
print('granules sent %d (%.0f blocks), union %d (%.0f blocks; index %.0f), re-sent %d (%.0f blocks)'
      % (tot_g, tot_g * G / 1024, uni, uni * G / 1024, uni_idx * G / 1024, tot_g - uni, (tot_g - uni) * G / 1024))
print('wire bytes of data datagrams', sum(s[4] for s in sends))
for k, v in exc.most_common():
    print('  %-70s %8.0f blocks' % (k, v * G / 1024))
print('re-sent blocks by chunk (top 15):', [(c, round(v * G / 1024)) for c, v in exc_by_chunk.most_common(15)])
print('chunks with re-sends:', len(exc_by_chunk), 'index chunks:', sorted(c for c in exc_by_chunk if c >= IDX0))
print('re-sent blocks by second after start:', [(s, round(v * G / 1024)) for s, v in sorted(exc_time.items())])
print('clients first request (s after start):', {s: round(t - t0, 2) for s, t in sorted(client_first.items())})
print('send span: %.2f .. %.2f s' % (sends[0][0] - t0, sends[-1][0] - t0))
