#!/usr/bin/python3
"""bench_jsonschema.py: the peer figure for bench_jsonschema.c.

Debian's python3-jsonschema (Draft202012Validator, built once) on the same
schema and payload, per message: json.loads, then is_valid. Rates are per second of process CPU
time (time.process_time), as in the C bench, so a loaded shared machine
moves the figure less. Run it with
/usr/bin/python3 (Debian's interpreter, which has the package).

    /usr/bin/python3 bench/bench_jsonschema.py <schema.json> <payload.json> [seconds]
"""
import json
import sys
import time

from jsonschema import Draft202012Validator


def main():
    schema = json.load(open(sys.argv[1]))
    payload = open(sys.argv[2], "rb").read().rstrip(b"\r\n")
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    validator = Draft202012Validator(schema)
    if not validator.is_valid(json.loads(payload)):
        sys.exit("payload does not validate")
    n = 0
    start = time.process_time()
    deadline = start + secs
    now = start
    while now < deadline:
        for _ in range(256):
            if not validator.is_valid(json.loads(payload)):
                sys.exit("payload did not validate during the run")
        n += 256
        now = time.process_time()
    rate = n / (now - start)
    print("%-34s %12.0f msg/s %8.1f MB/s %8.2f us/msg" % (
        "Python jsonschema (parse+validate)", rate, rate * len(payload) / 1e6, 1e6 / rate))


if __name__ == "__main__":
    main()
