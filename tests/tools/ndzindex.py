"""The content index (doc/FORMAT.md, "The content index" and "Pieces") read from its
bytes as FORMAT.md lays them out, with nothing of ndz's code: for the tests and
bench/ that work out by themselves which chunks and pieces differ between two disks
and which 1 KiB blocks of the image a piece-grain reload needs.

  ix = read(PATH)      ix.version, ix.source_bytes, ix.entries [(first, last, regions)],
                       ix.pieces {chunk: [(coff, clen, dlen, doff)]} (version 2)
  spans(ix, chunk, doff, dlen)   the (disk offset, length) byte spans a piece writes
  differ(fa, fb, spans)          do two open files differ over those spans
  lacking(ix, chunk, fa, fb)     [(coff, clen)] of the chunk's pieces that differ
  blocks(ix, chunk, diff)        ('whole' | 'partial', set of block numbers) to fetch
"""
import os
import struct

HEADER = 4096          # a chunk's header: blocks 0..3 of it
BLOCK = 1024
BLOCKS = 1024          # blocks of a 1 MiB chunk


class Index:
    pass


def read(path):
    d = open(path, 'rb').read()
    assert d[:8] == b'\x89NDZIDX\n', 'not a content index: %s' % path
    ix = Index()
    ix.version = struct.unpack_from('<H', d, 8)[0]
    n, _, ix.source_bytes, npieces = struct.unpack_from('<IIQI', d, 40)
    at, ix.entries = 64, []
    for _ in range(n):
        first, last, nr = struct.unpack_from('<QQI', d, at)
        at += 56
        ix.entries.append((first, last,
                           [struct.unpack_from('<QI', d, at + 12 * j) for j in range(nr)]))
        at += 12 * nr
    ix.pieces = {}
    for k in range(npieces if ix.version >= 2 else 0):
        c, coff, cl, dl, doff = struct.unpack_from('<IIIIQ', d, at + 64 * k)
        ix.pieces.setdefault(c, []).append((coff, cl, dl, doff))
    return ix


def spans(ix, chunk, doff, dlen):
    """The disk byte spans (offset, length) of the piece whose data is at doff..+dlen
    of the chunk's regions, clipped to the source size."""
    lo, hi, base = doff // 512, (doff + dlen) // 512, 0
    for start, cnt in ix.entries[chunk][2]:
        x, y = max(lo, base), min(hi, base + cnt)
        if x < y:
            o = (start + x - base) * 512
            m = max(0, min((y - x) * 512, ix.source_bytes - o))
            if m:
                yield o, m
        base += cnt


def differ(fa, fb, sp):
    """fa, fb: file descriptors; sp: spans. Any byte different?"""
    for o, m in sp:
        if os.pread(fa, m, o) != os.pread(fb, m, o):
            return True
    return False


def lacking(ix, chunk, fa, fb):
    return [(coff, cl) for coff, cl, dl, doff in ix.pieces.get(chunk, [])
            if differ(fa, fb, spans(ix, chunk, doff, dl))]


def blocks(ix, chunk, diff):
    """What a piece-grain reload fetches of a chunk whose pieces diff (non-empty) differ:
    its header's blocks and those of the differing pieces' frames (bytes HEADER + coff
    .. + clen of the chunk); the whole chunk when all its pieces differ, it has fewer
    than 2, or that covers every block anyway."""
    np = len(ix.pieces.get(chunk, []))
    b = set(range(HEADER // BLOCK))
    for coff, cl in diff:
        b.update(range((HEADER + coff) // BLOCK, (HEADER + coff + cl + BLOCK - 1) // BLOCK))
    if np < 2 or len(diff) == np or len(b) >= BLOCKS:
        return 'whole', set(range(BLOCKS))
    return 'partial', b


def plan(ix, chunks, fa, fb):
    """What a piece-grain reload of disk fb (that held fa's image) fetches of chunks:
    (pieces written, partial chunks, their blocks, whole chunks, {(chunk, block)})."""
    written = partial = pblocks = whole = 0
    need = set()
    for c in chunks:
        diff = lacking(ix, c, fa, fb)
        if not diff:
            continue
        kind, b = blocks(ix, c, diff)
        if kind == 'whole':
            whole += 1
        else:
            partial += 1
            written += len(diff)
            pblocks += len(b)
        need.update((c, k) for k in b)
    return written, partial, pblocks, whole, need
