#!/usr/bin/env python3
"""The kernel's share of replication on one machine, without a broker.

A "null broker" does only what no broker can avoid: a leader receives each chunk from a
client over loopback TCP and writes it to a file; with followers it also sends the chunk
from that file to each follower (sendfile, no copy in the sender), and each follower
receives it and writes it to a file of its own; the client waits for every chunk's
acknowledgement (acks=all, one request in flight). No parsing, no CRC, no index, no
protocol: the CPU the three processes use is a floor for any broker replicating those
bytes on this machine.

Usage: null_replication.py MEGABYTES CHUNK_KIB  — prints the brokers' CPU seconds for
RF 1 (leader alone) and RF 3 (leader and two followers), and their ratio.
"""
import os, socket, sys, tempfile, time

MB = int(sys.argv[1]) if len(sys.argv) > 1 else 200
CHUNK = (int(sys.argv[2]) if len(sys.argv) > 2 else 100) * 1024
COUNT = MB * 1024 * 1024 // CHUNK


def recv_exact(sock, view):
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError
        got += n


def listen():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def accept(server, path):
    """The client's (or leader's) connection, a chunk buffer, and the replica's file."""
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    return conn, memoryview(bytearray(CHUNK)), fd


def follower(server, directory, ready):
    os.write(ready, b"x")
    port = server.getsockname()[1]
    conn, view, fd = accept(server, os.path.join(directory, f"follower-{port}.log"))
    for _ in range(COUNT):
        recv_exact(conn, view)
        os.write(fd, view)
        conn.sendall(b"a")
    os._exit(0)


def leader(server, directory, follower_ports, ready):
    peers = []
    for port in follower_ports:
        p = socket.create_connection(("127.0.0.1", port))
        p.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peers.append(p)
    os.write(ready, b"x")
    conn, view, fd = accept(server, os.path.join(directory, "leader.log"))
    offset = 0
    for _ in range(COUNT):
        recv_exact(conn, view)
        os.write(fd, view)
        for p in peers:
            sent = 0
            while sent < CHUNK:
                sent += os.sendfile(p.fileno(), fd, offset + sent, CHUNK - sent)
        for p in peers:
            p.recv(1)
        offset += CHUNK
        conn.sendall(b"a")
    os._exit(0)


def run(replicas):
    directory = tempfile.mkdtemp(prefix="null-repl-")
    ready_r, ready_w = os.pipe()
    pids, ports = [], []
    for _ in range(replicas - 1):
        server = listen()
        ports.append(server.getsockname()[1])
        pid = os.fork()
        if pid == 0:
            follower(server, directory, ready_w)
        pids.append(pid)
        server.close()
        os.read(ready_r, 1)
    server = listen()
    port = server.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        leader(server, directory, ports, ready_w)
    pids.append(pid)
    server.close()
    os.read(ready_r, 1)
    payload = bytes((65 + (i * 7919) % 26) for i in range(CHUNK))
    client = socket.create_connection(("127.0.0.1", port))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    started = time.time()
    cpu = 0.0
    for i in range(COUNT):
        client.sendall(payload)
        client.recv(1)
        if i == COUNT - 1:
            cpu = sum(cpu_of(p) for p in pids)
    elapsed = time.time() - started
    for p in pids:
        os.waitpid(p, 0)
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)
    return cpu, elapsed


if __name__ == "__main__":
    one, t1 = run(1)
    three, t3 = run(3)
    print(f"{MB} MB in {CHUNK // 1024} KiB chunks: brokers' CPU RF 1 {one:.2f} s ({t1:.2f} s), "
          f"RF 3 {three:.2f} s ({t3:.2f} s), ratio {three / one:.2f}")
