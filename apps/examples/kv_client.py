#!/usr/bin/env python3
"""A KV client that is not ours: plain UDP sockets, the wire format of
apps/README.md ("KV wire format"). Usage:
  kv_client.py HOST [--port 9000] set KEY VALUE | get KEY | delete KEY
  kv_client.py --dump set KEY VALUE      # print the request datagram in hex
  kv_client.py --parse HEX               # print the response datagram HEX
"""
import socket, struct, sys

M, K0, K1, K2 = 2**64 - 1, 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
SEED, OPS = 0x6D6963616B760001, {"get": 1, "set": 2, "delete": 3}
STATUS = ["Success", "NotFound", "BadOp", "Malformed", "WrongPartition", "TooLarge", "NoRoom"]

def rotl(x, r): return ((x << r) | (x >> (64 - r))) & M

def mix64(x):
    x ^= x >> 30; x = x * 0xBF58476D1CE4E5B9 & M; x ^= x >> 27
    x = x * 0x94D049BB133111EB & M; return x ^ (x >> 31)

def key_hash(key):
    h = SEED ^ (len(key) * K0 & M)
    for i in range(0, len(key), 8):
        w = int.from_bytes(key[i:i + 8].ljust(8, b"\0"), "little")
        h = (rotl(h ^ (rotl(w * K1 & M, 31) * K2 & M), 27) * K0 + K1) & M
    return mix64(h)

def request(op, key, value=b"", opaque=1):
    msg = struct.pack("<BBHHHQI", OPS[op], 0, len(key), len(value), 0, key_hash(key), opaque)
    return struct.pack("<HBB", 0x4B56, 0, 1) + msg + key + value

def parse(data):
    magic, kind, count = struct.unpack_from("<HBB", data)
    assert magic == 0x4B56 and kind == 1, "not a response batch"
    at, out = 4, []
    for _ in range(count):
        op, st, klen, vlen, _r, kh, opaque = struct.unpack_from("<BBHHHQI", data, at)
        at += 20 + klen
        out.append((op, STATUS[st] if st < len(STATUS) else st, opaque, data[at:at + vlen]))
        at += vlen
    return out

def main(a):
    if a[0] == "--parse":
        return print(parse(bytes.fromhex(a[1])))
    dump = a[0] == "--dump"
    host = None if dump else a.pop(0)
    a = a[1:] if dump else a
    port = 9000
    if a[0] == "--port":
        port, a = int(a[1]), a[2:]
    req = request(a[0], a[1].encode(), a[2].encode() if len(a) > 2 else b"")
    if dump:
        return print(req.hex())
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(2)
    s.sendto(req, (host, port))
    print(parse(s.recv(2048)))

if __name__ == "__main__":
    main(sys.argv[1:])
