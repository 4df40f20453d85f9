#!/usr/bin/python3
"""judge.py: what a store-and-forward run handed out, what was acknowledged,
and what the cluster received, reading only what the run left behind.

    judge.py --dir OUT [--json]

Inputs in OUT (written by run.sh):
  devices/summary.json, devices/acks-NNN.log  bench/devices.c: readings
      handed out per device, and one "n ack_ms" line per acknowledgement
  the arrivals, one of (the scenario's "output" says which; the rules are
  the same, only what each source can tell differs, see ARRIVALS):
  store.jsonl        OUTPUT=danube: the mock cluster's store, in the order
      it received (one JSON object per stored message, with its topic
      offset; payload "d=DDD n=N t=MS ...")
  arrivals.jsonl     OUTPUT=mqtt: what the remote Mosquitto's persistent
      QoS 1 subscriber received (recorder.py), in arrival order: the same
      payloads, no offsets, the remote's DUP flag and the gateway's
      tributary.replayed mark
  walcheck.jsonl     `tributary wal check` after the clean stop: per topic
      the persisted dropped count (it survives restarts, unlike /stats)
  events.jsonl       the timeline: outage start/end, kills, drain

Why the judge reads files and never asks the gateway: the gateway is the
thing under test. The devices' logs say what was promised (a PUBACK), the
cluster's store says what was delivered; only the dropped count, which is
the gateway's own confession, comes from it.

What it reports (and what fails the run, exit status 1):
  handed_out      readings the devices took
  acknowledged    readings the gateway acknowledged (distinct)
  received        readings the cluster stored (distinct)
  missing         acknowledged, never received
  dropped_total   the WAL's persisted dropped counters, summed
  offsets_not_received  WAL offsets the cluster never got (gaps in each
                  topic's offsets): the records the bound deleted
  missing_uncounted  offsets_not_received - dropped_total if positive:
                  records lost without being counted.  FAILS if > 0, and
                  with BOUNDED=0 any missing reading FAILS.
  drops_oldest    in every topic, the offsets that never arrived lie within
                  one window that starts at the first of them and is as long
                  as the topic's dropped count: the bound deleted the oldest
                  unreplicated records, not newer ones.  FAILS if false.
  counted_but_delivered  dropped_total - offsets_not_received: the count
                  running ahead of the loss (see drops_oldest's comment)
  duplicates      records stored more than once: resent by a device after
                  its PUBACK was lost (new offset), or resent by the gateway
                  to a cluster that had lost its dedup marker (same offset).
                  OUTPUT=mqtt (no offsets, no dedup at the remote): split
                  into the remote's own redeliveries to its subscriber (DUP
                  set), copies the gateway marked tributary.replayed (its
                  resends after a lost session or a restart carry it), and
                  unmarked ones, which only a device's resend after a lost
                  PUBACK can make: FAILS if there are more unmarked ones
                  than the devices resent (summary.json's resends).
  out_of_order    per device, a reading first received after a higher one
                  of the same device had been.  FAILS if > 0.
  offset_order    per topic, an offset first received after a higher one.
                  FAILS if > 0. (OUTPUT=mqtt: None, and so are the
                  offset-based counts: an MQTT message carries no offset;
                  the order is judged per device, by its counter.)
  replay          the backlog (readings taken before the outage ended,
                  received after): how long after the outage ended the
                  first came and the last came (time to drain), the mean
                  rate from first to last, the best 1-second rate, and that
                  as a multiple of the rate readings arrive.
"""
import argparse
import collections
import glob
import json
import os
import re
import sys

PAYLOAD_RE = re.compile(r"^d=(\d+) n=(\d+) t=(\d+) ")


def load_jsonl(path):
    out, bad = [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                bad += 1  # a line cut by a SIGKILLed mock cluster
    return out, bad


# ARRIVALS: each source gives, in arrival order, dicts with topic, offset
# (None when the source has none), payload (None if not UTF-8),
# received_at (epoch ms), dup (the remote's redelivery flag) and replayed
# (the gateway's mark); and the count of lines cut by a SIGKILL.
def arrivals_mock(d):
    """The mock cluster's store: every record with its topic offset."""
    store, bad = load_jsonl(os.path.join(d, "store.jsonl"))
    return [{"topic": r["topic"], "offset": r["offset"],
             "payload": r["payload"] if r.get("payload_encoding") == "utf-8" else None,
             "received_at": r["received_at"], "dup": False, "replayed": False} for r in store], bad


def arrivals_mqtt(d):
    """The remote subscriber's recording (recorder.py): no offsets."""
    recs, bad = load_jsonl(os.path.join(d, "arrivals.jsonl"))
    return [{"topic": r["topic"], "offset": None, "payload": r["payload"], "received_at": r["received_at"],
             "dup": bool(r.get("dup")), "replayed": bool(r.get("replayed"))} for r in recs], bad


ARRIVALS = {"danube": arrivals_mock, "mqtt": arrivals_mqtt}


def load_acks(devdir):
    acked = {}
    for path in sorted(glob.glob(os.path.join(devdir, "acks-*.log"))):
        dev = int(os.path.basename(path)[5:8])
        s = set()
        with open(path) as f:
            for line in f:
                parts = line.split()
                if parts:
                    s.add(int(parts[0]))
        acked[dev] = s
    return acked


def offset_gaps(offsets):
    """Runs of offsets never received between 1 and the highest received:
    a list of (first, last)."""
    runs, expect = [], 1
    for off in sorted(offsets):
        if off > expect:
            runs.append((expect, off - 1))
        expect = off + 1
    return runs


def judge(d):
    summary = json.load(open(os.path.join(d, "devices", "summary.json")))
    devs = {x["device"]: x for x in summary["devices"]}
    acked = load_acks(os.path.join(d, "devices"))
    events, _ = load_jsonl(os.path.join(d, "events.jsonl"))
    walcheck, _ = load_jsonl(os.path.join(d, "walcheck.jsonl"))
    scenario = next((e for e in events if e["event"] == "scenario"), {})
    output = scenario.get("output", "danube")
    store, bad_lines = ARRIVALS[output](d)
    has_offsets = output == "danube"
    outage_end = next((e["at_ms"] for e in events if e["event"] == "outage_end"), None)

    seen = set()                       # (device, n)
    seen_off = set()                   # (topic, offset)
    highest = collections.defaultdict(int)
    highest_off = collections.defaultdict(int)
    offsets = collections.defaultdict(set)
    dup_same_offset = dup_new_offset = out_of_order = offset_order = 0
    dup_remote = dup_marked = dup_unmarked = 0
    unparsed = 0
    backlog_times = []                 # received_at of backlog readings
    after_end_times = []
    for r in store:
        m = PAYLOAD_RE.match(r["payload"]) if r["payload"] is not None else None
        if not m:
            unparsed += 1
            continue
        dev, n, taken = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if has_offsets:
            okey = (r["topic"], r["offset"])
            if okey in seen_off:
                dup_same_offset += 1
                continue
            seen_off.add(okey)
            offsets[r["topic"]].add(r["offset"])
            if r["offset"] < highest_off[r["topic"]]:
                offset_order += 1
            highest_off[r["topic"]] = max(highest_off[r["topic"]], r["offset"])
        if (dev, n) in seen:
            dup_new_offset += 1
            if r["dup"]:
                dup_remote += 1
            elif r["replayed"]:
                dup_marked += 1
            else:
                dup_unmarked += 1
            continue
        seen.add((dev, n))
        if n < highest[dev]:
            out_of_order += 1
        highest[dev] = max(highest[dev], n)
        if outage_end is not None and r["received_at"] >= outage_end:
            after_end_times.append(r["received_at"])
            if taken < outage_end:
                backlog_times.append(r["received_at"])

    handed_out = sum(x["generated"] for x in devs.values())
    acked_all = {(dev, n) for dev, s in acked.items() for n in s}
    missing = sorted(acked_all - seen)
    dropped_total = sum(t.get("dropped", 0) for t in walcheck)
    lost_total = sum(t.get("lost", 0) for t in walcheck)

    gaps = {t: offset_gaps(o) for t, o in offsets.items()}
    # memory_first: a restart continues above the topic's offset reservation
    # (docs/WAL.md "Offset reservation": up to 1.5 x 2^24 offsets are never
    # used). A gap longer than every reading the devices handed out cannot be
    # records lost (there were never that many): it is that skip, and there
    # is at most one per topic per restart. Whether anything acknowledged is
    # missing is `missing`'s to say.
    kills_n = sum(1 for e in events if e["event"] == "gateway_killed")
    skipped_at_restart = 0
    too_many_skips = []
    if scenario.get("durability") == "memory_first":
        for t, runs in gaps.items():
            skips = [(a, b) for a, b in runs if b - a + 1 > handed_out]
            if len(skips) > kills_n:
                too_many_skips.append(t)
            skipped_at_restart += sum(b - a + 1 for a, b in skips)
            gaps[t] = [(a, b) for a, b in runs if b - a + 1 <= handed_out]
    not_received = sum(b - a + 1 for runs in gaps.values() for a, b in runs)
    # the WAL's last offsets must all have arrived too (a gap at the end is
    # invisible to offset_gaps): compare with wal check's last offset
    tail_missing = 0
    for t in walcheck if has_offsets else ():
        if t["topic"].startswith("$") or not t.get("records"):
            continue  # $sessions: the gateway's own MQTT session log, never replicated
        hi = max(offsets[t["topic"]]) if offsets.get(t["topic"]) else 0
        tail_missing += max(0, t["last_offset"] - hi)
    not_received += tail_missing

    # The bound deletes the oldest unreplicated segment first, so what never
    # arrived must lie inside one window of the topic's offsets: from the
    # first offset that never arrived, as many as the topic counted dropped.
    # (The count may run ahead of the loss: a segment the replicator was
    # already reading when the bound deleted it is still delivered from the
    # open file, and a checkpoint that had not reached disk before a kill
    # makes recovery count records the cluster already had.)
    dropped_by_topic = {t["topic"]: t.get("dropped", 0) + t.get("lost", 0) for t in walcheck}
    drops_oldest = True
    for topic, runs in gaps.items():
        if runs:
            first, last = runs[0][0], runs[-1][1]
            if last - first + 1 > dropped_by_topic.get(topic, 0):
                drops_oldest = False

    rate_in = summary["rate"] * len(devs)
    replay = None
    if outage_end is not None and backlog_times:
        first, last = min(after_end_times), max(backlog_times)
        per_sec = collections.Counter(t // 1000 for t in backlog_times)
        mean = len(backlog_times) / max((last - first) / 1000.0, 0.001)
        replay = {
            "backlog": len(backlog_times),
            "first_after_end_s": round((first - outage_end) / 1000.0, 3),
            "time_to_drain_s": round((last - outage_end) / 1000.0, 3),
            "mean_rate": round(mean),
            "best_1s_rate": max(per_sec.values()),
            "mean_rate_x_arrival": round(mean / rate_in, 1),
            "best_1s_x_arrival": round(max(per_sec.values()) / rate_in, 1),
        }

    kills = [e for e in events if e["event"] == "gateway_killed"]
    device_resends = sum(x.get("resends", 0) for x in devs.values())
    if not has_offsets:
        not_received = offset_order = None
    sw = next((e for e in reversed(events) if e["event"] == "switches"), {})
    report = {
        "scenario": scenario,
        "handed_out": handed_out,
        "acknowledged": len(acked_all),
        "received": len(seen),
        "missing": len(missing),
        "missing_first": [f"d{dev:03d} n={n}" for dev, n in missing[:10]],
        "dropped_total": dropped_total,
        "lost_total": lost_total,
        "output": output,
        "offsets_not_received": not_received,
        "missing_uncounted": max(0, not_received - dropped_total - lost_total) if has_offsets else None,
        "counted_but_delivered": max(0, dropped_total + lost_total - not_received) if has_offsets else None,
        "drops_oldest": drops_oldest if has_offsets else None,
        "offset_gaps": {t: runs for t, runs in gaps.items() if runs},
        "duplicates": dup_same_offset + dup_new_offset,
        "duplicates_resent_by_device": dup_new_offset if has_offsets else None,
        "duplicates_resent_by_gateway": dup_same_offset if has_offsets else None,
        "duplicates_redelivered_by_remote": None if has_offsets else dup_remote,
        "duplicates_marked_replayed": None if has_offsets else dup_marked,
        "duplicates_unmarked": None if has_offsets else dup_unmarked,
        "device_resends": device_resends,
        "out_of_order": out_of_order,
        "offset_order": offset_order,
        "unacked_taken": handed_out - len(acked_all),
        "received_unacked": len(seen - acked_all),
        "kills": len(kills),
        "durability": scenario.get("durability", "log"),
        "offsets_skipped_at_restart": skipped_at_restart,
        "switches_to_log": sw.get("spills", 0),
        "switches_to_memory": sw.get("to_memory", 0),
        "kills_mid_replay_lag": [k.get("lag_at_kill") for k in kills if k.get("phase") == "replay"],
        "replay": replay,
        "arrival_rate": rate_in,
        "store_lines_cut": bad_lines,
        "store_records_unparsed": unparsed,
    }
    failures = []
    if report["out_of_order"]:
        failures.append(f"{out_of_order} readings out of order")
    if report["offset_order"]:
        failures.append(f"{offset_order} offsets out of order")
    if not has_offsets and dup_unmarked > device_resends:
        failures.append(f"{dup_unmarked} second copies neither marked tributary.replayed nor the remote's "
                        f"redelivery, more than the {device_resends} readings the devices resent")
    if report["missing_uncounted"]:
        failures.append(f"{report['missing_uncounted']} records lost without being counted as dropped")
    if not scenario.get("bounded"):
        if missing:
            failures.append(f"{len(missing)} acknowledged readings missing")
        if dropped_total:
            failures.append(f"{dropped_total} dropped although the run was not meant to reach the bound")
    elif not has_offsets:
        failures.append("a bounded run is judged by the offsets it lost, and MQTT arrivals carry none")
    else:
        if len(missing) > not_received:
            failures.append("more readings missing than records deleted by the bound")
        if not drops_oldest:
            failures.append("the bound did not delete the oldest records only")
    if unparsed:
        failures.append(f"{unparsed} {'stored records' if has_offsets else 'arrivals'} not from the devices")
    if too_many_skips:
        failures.append(f"more offset skips than restarts on {', '.join(too_many_skips)}")
    report["failures"] = failures
    return report


def show(r):
    rp = r["replay"] or {}
    lines = [
        f"handed out      {r['handed_out']:>10,}",
        f"acknowledged    {r['acknowledged']:>10,}",
        f"received        {r['received']:>10,}",
        f"missing         {r['missing']:>10,}   (acknowledged, never received) {' '.join(r['missing_first'])}",
    ]
    if r["output"] == "danube":
        lines += [
            f"dropped_total   {r['dropped_total']:>10,}   (WAL, persisted); offsets never received {r['offsets_not_received']:,}; "
            f"uncounted {r['missing_uncounted']:,}; counted but delivered {r['counted_but_delivered']:,}; drops were the oldest: {'yes' if r['drops_oldest'] else 'NO'}",
            f"duplicates      {r['duplicates']:>10,}   (resent by a device after a lost PUBACK "
            f"{r['duplicates_resent_by_device']:,}; by the gateway, same offset {r['duplicates_resent_by_gateway']:,})",
            f"out of order    {r['out_of_order']:>10,}   (per device); offsets out of order {r['offset_order']:,}",
        ]
    else:
        lines += [
            f"dropped_total   {r['dropped_total']:>10,}   (WAL, persisted; MQTT arrivals carry no offsets to count gaps by)",
            f"duplicates      {r['duplicates']:>10,}   (the remote's own redeliveries, DUP {r['duplicates_redelivered_by_remote']:,}; "
            f"marked tributary.replayed {r['duplicates_marked_replayed']:,}; unmarked {r['duplicates_unmarked']:,}, "
            f"at most the devices' resends {r['device_resends']:,})",
            f"out of order    {r['out_of_order']:>10,}   (per device, first receipts)",
        ]
    lines.append(f"gateway kills   {r['kills']:>10,}   (lag at each replay kill: {r['kills_mid_replay_lag']})")
    if r.get("durability") == "memory_first":
        lines.append(f"durability      memory_first: {r['switches_to_log']:,} switches to the log, "
                     f"{r['switches_to_memory']:,} back to memory (summed over the gateway's lives); "
                     f"{r['offsets_skipped_at_restart']:,} offsets skipped at restarts (the reservation)")
    if rp:
        lines.append(f"replay          {rp['backlog']:>10,}   backlog readings; first {rp['first_after_end_s']} s after the "
                     f"outage ended, drained {rp['time_to_drain_s']} s after; mean {rp['mean_rate']:,}/s "
                     f"({rp['mean_rate_x_arrival']}x arrival), best second {rp['best_1s_rate']:,}/s "
                     f"({rp['best_1s_x_arrival']}x arrival of {r['arrival_rate']:,.0f}/s)")
    lines.append("PASS" if not r["failures"] else "FAIL: " + "; ".join(r["failures"]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    a = ap.parse_args()
    r = judge(a.dir)
    with open(os.path.join(a.dir, "report.json"), "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(r) if a.json else show(r))
    sys.exit(1 if r["failures"] else 0)


if __name__ == "__main__":
    main()
