#!/usr/bin/python3
"""sqs_md5.py [FILE]: for each line of FILE (or stdin), a JSON object of SQS
message attributes in the AWS JSON 1.0 shape ({"Name": {"DataType": ...,
"StringValue": ... | "BinaryValue": "<base64>"}}), one line out: the
attributes' MD5OfMessageAttributes in hex, a space, and the bytes they count
toward a message's size (name + DataType + value, a binary's decoded).

An implementation of SQS's digest of its own, as Amazon's developer guide
describes it ("Calculating the MD5 message digest for message attributes")
and the AWS SDK for Java's MessageMD5ChecksumHandler makes it, for
test_sqs_msg to hold src/sqs_msg.c to: the attributes sorted by name; for
each, a 4-byte big-endian length and the UTF-8 name, the same for the
DataType, then the transport byte 1 with the length and UTF-8 StringValue,
or 2 with the length and the decoded BinaryValue; MD5 over it all.  The
standard library only (hashlib, struct, base64)."""
import base64
import hashlib
import json
import struct
import sys


def field(data):
    return struct.pack(">I", len(data)) + data


def digest(attrs):
    md5 = hashlib.md5()
    size = 0
    for name in sorted(attrs, key=lambda n: n.encode("utf-8")):
        attr = attrs[name]
        dtype = attr["DataType"]
        md5.update(field(name.encode("utf-8")))
        md5.update(field(dtype.encode("utf-8")))
        if "StringValue" in attr:
            value = attr["StringValue"].encode("utf-8")
            md5.update(b"\x01" + field(value))
        else:
            value = base64.b64decode(attr["BinaryValue"], validate=True)
            md5.update(b"\x02" + field(value))
        size += len(name.encode("utf-8")) + len(dtype.encode("utf-8")) + len(value)
    return md5.hexdigest(), size


def main():
    src = open(sys.argv[1], encoding="utf-8") if len(sys.argv) > 1 else sys.stdin
    for line in src:
        if line.strip():
            md5, size = digest(json.loads(line))
            print(md5, size)


if __name__ == "__main__":
    main()
