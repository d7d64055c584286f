#!/usr/bin/env python3
"""Asks a MongoDB-compatible server what the tests ask it, with nothing but
Python's standard library: `hello` over OP_MSG, optionally over TLS, and
with --user a SCRAM-SHA-256 login followed by `ping` in the login's
database. Prints one line and exits 0 when the server answered ok.

    mongo-probe.py HOST PORT [--tls CA_FILE] [--user NAME PASSWORD DB]

Used by .ci/services-fresh-check.sh, which runs before anything is built.
"""

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import sys

OP_MSG = 2013


def bson_element(name, value):
    key = name.encode() + b"\x00"
    if isinstance(value, bool):
        return b"\x08" + key + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x10" + key + struct.pack("<i", value)
    if isinstance(value, str):
        data = value.encode() + b"\x00"
        return b"\x02" + key + struct.pack("<i", len(data)) + data
    if isinstance(value, bytes):
        return b"\x05" + key + struct.pack("<iB", len(value), 0) + value
    raise TypeError(f"no BSON encoding here for {type(value).__name__}")


def bson_encode(doc):
    body = b"".join(bson_element(k, v) for k, v in doc.items())
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def bson_decode(data):
    """The top-level scalar fields of a document (nested ones are skipped)."""
    doc, pos, end = {}, 4, struct.unpack_from("<i", data)[0] - 1
    while pos < end:
        kind = data[pos]
        name_end = data.index(b"\x00", pos + 1)
        name = data[pos + 1 : name_end].decode()
        pos = name_end + 1
        if kind == 0x01:
            doc[name] = struct.unpack_from("<d", data, pos)[0]
            pos += 8
        elif kind == 0x02:
            size = struct.unpack_from("<i", data, pos)[0]
            doc[name] = data[pos + 4 : pos + 3 + size].decode()
            pos += 4 + size
        elif kind in (0x03, 0x04):
            pos += struct.unpack_from("<i", data, pos)[0]
        elif kind == 0x05:
            size = struct.unpack_from("<i", data, pos)[0]
            doc[name] = data[pos + 5 : pos + 5 + size]
            pos += 5 + size
        elif kind == 0x08:
            doc[name] = data[pos] == 1
            pos += 1
        elif kind == 0x09 or kind == 0x12 or kind == 0x11:
            doc[name] = struct.unpack_from("<q", data, pos)[0]
            pos += 8
        elif kind == 0x10:
            doc[name] = struct.unpack_from("<i", data, pos)[0]
            pos += 4
        elif kind == 0x07:
            pos += 12
        elif kind == 0x0A:
            doc[name] = None
        else:
            raise ValueError(f"BSON type {kind:#x} of field {name!r} is not read here")
    return doc


class Connection:
    def __init__(self, host, port, ca_file):
        sock = socket.create_connection((host, port), timeout=10)
        if ca_file:
            context = ssl.create_default_context(cafile=ca_file)
            sock = context.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.request_id = 0

    def command(self, doc):
        self.request_id += 1
        body = struct.pack("<IB", 0, 0) + bson_encode(doc)
        header = struct.pack("<iiii", 16 + len(body), self.request_id, 0, OP_MSG)
        self.sock.sendall(header + body)
        length, _, response_to, opcode = struct.unpack("<iiii", self.read(16))
        if opcode != OP_MSG or response_to != self.request_id:
            raise ValueError(f"unexpected reply: opcode {opcode}, responseTo {response_to}")
        body = self.read(length - 16)
        if body[4] != 0:
            raise ValueError("the reply does not start with a body section")
        reply = bson_decode(body[5:])
        if reply.get("ok") != 1:
            raise ValueError(f"{next(iter(doc))} failed: {reply.get('errmsg', reply)}")
        return reply

    def read(self, size):
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return data


def scram_sha_256(conn, user, password, db):
    nonce = base64.b64encode(os.urandom(24)).decode()
    first_bare = f"n={user},r={nonce}"
    reply = conn.command(
        {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": ("n,," + first_bare).encode(), "$db": db}
    )
    server_first = reply["payload"].decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    if not fields["r"].startswith(nonce):
        raise ValueError("the server's nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    final_bare = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    final = f"{final_bare},p={base64.b64encode(proof).decode()}"
    reply = conn.command(
        {"saslContinue": 1, "conversationId": reply.get("conversationId", 1), "payload": final.encode(), "$db": db}
    )
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    expected = "v=" + base64.b64encode(hmac.digest(server_key, auth_message, "sha256")).decode()
    if reply["payload"].decode() != expected:
        raise ValueError("the server's signature does not verify")
    while not reply.get("done", True):
        reply = conn.command(
            {"saslContinue": 1, "conversationId": reply.get("conversationId", 1), "payload": b"", "$db": db}
        )


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    host, port, rest = argv[1], int(argv[2]), argv[3:]
    ca_file = user = None
    while rest:
        if rest[0] == "--tls" and len(rest) >= 2:
            ca_file, rest = rest[1], rest[2:]
        elif rest[0] == "--user" and len(rest) >= 4:
            user, rest = rest[1:4], rest[4:]
        else:
            sys.exit(__doc__)
    conn = Connection(host, port, ca_file)
    hello = conn.command({"hello": 1, "$db": "admin"})
    said = f"{host}:{port}{' over TLS' if ca_file else ''}: hello ok (maxWireVersion {hello.get('maxWireVersion')})"
    if user:
        name, password, db = user
        scram_sha_256(conn, name, password, db)
        conn.command({"ping": 1, "$db": db})
        said += f", SCRAM-SHA-256 as {name} in {db}, ping ok"
    print(said)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception as error:  # one line, then a failing exit, for the shell script
        print(f"{sys.argv[1:3]}: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
