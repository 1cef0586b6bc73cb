#!/usr/bin/env python3
"""Prints the batches of strom (or Kafka) partition directories whose offsets fall in a
range: offsets, file position, leader epoch, producer id and epoch, sequences, base
timestamp, and the first and last record value (of uncompressed batches).

Usage: dump_batches.py FIRST_OFFSET LAST_OFFSET PARTITION_DIR...

Used to read what `strom bench faults` saves when a promise does not hold: the same
records in two batches under different producer epochs are a client's re-send; a batch
that differs between replicas is a replication fault.
"""
import glob
import os
import struct
import sys

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header


def varint(data, at):
    """A zigzag varint at `at`: (value, position after it)."""
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7


def values(records, count):
    """The values of an uncompressed records section."""
    out, at = [], 0
    for _ in range(count):
        length, at = varint(records, at)
        start = at
        at += 1  # attributes
        _, at = varint(records, at)  # timestamp delta
        _, at = varint(records, at)  # offset delta
        key_length, at = varint(records, at)
        at += max(key_length, 0)
        value_length, at = varint(records, at)
        out.append(records[at:at + max(value_length, 0)].decode(errors="replace"))
        at = start + length
    return out


def dump(directory, first, last):
    print("==", directory)
    for segment in sorted(glob.glob(os.path.join(directory, "*.log"))):
        data = open(segment, "rb").read()
        position = 0
        while position + HEADER.size <= len(data):
            (base, length, leader_epoch, _magic, _crc, attributes, last_delta, base_ts,
             _max_ts, producer_id, producer_epoch, base_seq, count) = HEADER.unpack_from(data, position)
            end = position + 12 + length
            if base > last:
                break
            if base + last_delta >= first:
                if attributes & 0x07 == 0:
                    vals = values(data[position + HEADER.size:end], count)
                    shown = f"values {vals[0]}..{vals[-1]}" if vals else "no records"
                else:
                    shown = f"compressed (codec {attributes & 0x07})"
                print(f"  offsets {base}..{base + last_delta} position {position} "
                      f"leader epoch {leader_epoch} producer {producer_id} epoch {producer_epoch} "
                      f"sequences {base_seq}..{base_seq + last_delta} timestamp {base_ts} {shown}")
            position = end


if __name__ == "__main__":
    for d in sys.argv[3:]:
        dump(d, int(sys.argv[1]), int(sys.argv[2]))
