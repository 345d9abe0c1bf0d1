#!/usr/bin/env python3
"""Helpers of bench/seed.sh, independent of the ndz code: reads the content index
(doc/FORMAT.md, "The content index") itself and compares disks byte by byte.
  fill DIR BYTES              copy files of /usr into DIR until BYTES are copied
  change DIR SEED BYTES       rewrite, add and delete files under DIR: about BYTES
  bytes INDEX                 bytes the index's regions cover (what a scan reads)
  lacking INDEX REF DISK      chunks whose regions' bytes differ between REF and DISK
  pieces INDEX REF DISK:LACK...  what a piece-grain reload of each DISK fetches (its
                              chunks in the file LACK, from lacking): a chunk some of
                              whose pieces differ, its header's 1 KiB blocks and those
                              of those pieces' frames; all differ (or under 2 pieces):
                              1024 blocks. A line a disk "written P partial C pblocks B
                              whole W blocks N", then "union U" (blocks some disk needs)
  save INDEX DISK OUT CHUNKS  save DISK's [first, last) of CHUNKS (a file) to OUT
  load DISK SAVED             write them back
"""
import os, random, shutil, sys, pickle

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'tools'))
import ndzindex  # noqa: E402


def index(path):
    ix = ndzindex.read(path)
    return ix.source_bytes, ix.entries


def spans(src, regs):
    for s, c in regs:
        a, e = s * 512, min((s + c) * 512, src)
        if e > a:
            yield a, e


def files_of(top):
    out = []
    for d, _, fs in os.walk(top):
        for f in fs:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append(p)
    out.sort()
    return out


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == 'fill':
        dst, want, done = a[0], int(a[1]), 0
        for top in ('/usr/lib', '/usr/share', '/usr/bin', '/usr/include'):
            for p in files_of(top):
                try:
                    sz = os.path.getsize(p)
                    if sz < 1024 or sz > (32 << 20) or done + sz > want:
                        continue
                    q = os.path.join(dst, p.lstrip('/'))
                    os.makedirs(os.path.dirname(q), exist_ok=True)
                    shutil.copyfile(p, q)
                    done += sz
                except OSError:
                    continue
                if done >= want:
                    print(done)
                    return
        print(done)
    elif cmd == 'change':
        top, rnd, want = a[0], random.Random(int(a[1])), int(a[2])
        fs = [p for p in files_of(top) if os.path.getsize(p) >= 4096]
        rnd.shuffle(fs)
        third, i = want // 3, 0
        done = 0          # rewrite: new bytes over a third, in place
        while done < third and i < len(fs):
            p = fs[i]; i += 1
            sz = os.path.getsize(p)
            with open(p, 'r+b') as f:
                f.write(os.urandom(sz))
            done += sz
        done = 0          # delete a third
        while done < third and i < len(fs):
            p = fs[i]; i += 1
            done += os.path.getsize(p)
            os.unlink(p)
        done, k = 0, 0    # add a third: new files, half random, half copies
        os.makedirs(os.path.join(top, 'new%s' % a[1]), exist_ok=True)
        while done < want - 2 * third and i < len(fs):
            p = fs[i]; i += 1
            q = os.path.join(top, 'new%s' % a[1], 'f%d' % k); k += 1
            if k % 2:
                data = os.urandom(min(os.path.getsize(p), 1 << 20))
            else:
                data = open(p, 'rb').read()
            open(q, 'wb').write(data)
            done += len(data)
    elif cmd == 'bytes':
        src, ents = index(a[0])
        print(sum(e - s for _, _, rg in ents for s, e in spans(src, rg)))
    elif cmd == 'lacking':
        src, ents = index(a[0])
        fa, fb = os.open(a[1], os.O_RDONLY), os.open(a[2], os.O_RDONLY)
        for i, (_, _, rg) in enumerate(ents):
            diff = False
            for s, e in spans(src, rg):
                p = s
                while p < e and not diff:
                    k = min(e - p, 8 << 20)
                    diff = os.pread(fa, k, p) != os.pread(fb, k, p)
                    p += k
                if diff:
                    break
            if diff:
                print(i)
    elif cmd == 'pieces':
        ix = ndzindex.read(a[0])
        assert ix.version == 2, 'a version 2 index (pieces)'
        fa = os.open(a[1], os.O_RDONLY)
        union = set()
        for arg in a[2:]:
            disk, lack = arg.split(':')
            fb = os.open(disk, os.O_RDONLY)
            written, partial, pblocks, whole, need = ndzindex.plan(
                ix, [int(x) for x in open(lack).read().split()], fa, fb)
            union |= need
            print('written', written, 'partial', partial, 'pblocks', pblocks, 'whole', whole,
                  'blocks', pblocks + 1024 * whole)
        print('union', len(union))
    elif cmd == 'save':
        _, ents = index(a[0])
        fd = os.open(a[1], os.O_RDONLY)
        ch = [int(x) for x in open(a[3]).read().split()]
        saved = [(ents[c][0] * 512, os.pread(fd, (ents[c][1] - ents[c][0]) * 512,
                                               ents[c][0] * 512)) for c in ch]
        pickle.dump(saved, open(a[2], 'wb'))
    elif cmd == 'load':
        fd = os.open(a[0], os.O_WRONLY)
        for off, data in pickle.load(open(a[1], 'rb')):
            os.pwrite(fd, data, off)
        os.fsync(fd)
    else:
        sys.exit('seed.py: unknown command ' + cmd)


main()
