"""compare_table.py: bench/compare's results as one Markdown table, both
columns and the ratio (Tributary / Mosquitto), with the machine and the
knobs above it, so the file can be pasted into docs/GUARANTEES.md as is.

Kept apart from the measuring code so the table can be rebuilt from a
saved compare.json (python3 bench/compare_table.py build/bench/compare.json)
without running anything again.
"""
import json
import sys


def num(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float) and abs(v) < 100:
        return f"{v:,.2f}{unit}"
    return f"{v:,.0f}{unit}"


def ratio(t, m):
    if t is None or m in (None, 0):
        return "-"
    return f"{t / m:,.2f}"


def mib(b):
    return None if b is None else b / 1048576


def markdown(r):
    mc = r["machine"]
    k = r["knobs"]
    lines = [
        f"Measured {r['date']} by `bench/compare` in {r.get('total_seconds', 0) / 60:.1f} minutes: "
        f"{mc['cores']} cores ({mc['cpu']}), kernel {mc['kernel']}, {mc['fs']}, fdatasync of 4 KiB "
        f"p50 {mc['fdatasync_ms_p50']} ms / p99 {mc['fdatasync_ms_p99']} ms; Mosquitto {mc['mosquitto']} (Debian), "
        "persistence on. Tributary: wal.fsync always unless a row says otherwise. Ratio = Tributary / Mosquitto.",
        "",
        "| measure | Tributary | Mosquitto | ratio |",
        "|---|--:|--:|--:|",
    ]

    def row(name, t, m, unit="", rat=True):
        lines.append(f"| {name} | {num(t, unit) if not isinstance(t, str) else t} | "
                     f"{num(m, unit) if not isinstance(m, str) else m} | {ratio(t, m) if rat else '-'} |")

    for x in r.get("ingest", []):
        row(f"ingest, QoS {x['qos']}, {x['connections']:,} connections, Tributary wal.fsync {x.get('fsync', 'always')} "
            f"(msg/s, median of {k['repeats']})",
            x["tributary"], x["mosquitto"])
    b = r.get("burst")
    if b:
        t = b["tributary"]
        for name, label in (("mosquitto_default", "bridge defaults"), ("mosquitto_unlimited", "bridge, queue limit removed")):
            m = b[name]
            row(f"burst: {k['burst_n']:,} QoS 1 from 10 clients at full speed, acknowledged ({label})",
                t["acked"], m["acked"])
            row(f"burst: ... of which reached the far side ({label})", t["arrived"], m["arrived"])
            row(f"burst: acknowledged and never reached the far side ({label})",
                t["acked"] - t["arrived"], m["acked"] - m["arrived"], rat=False)
    s = r.get("steady")
    if s:
        t, m = s["tributary"], s["mosquitto"]
        head = f"steady {s['rate']:,}/s QoS 1 for {s['seconds']:.0f} s"
        row(f"{head}: bytes written per hour (MiB)", mib(t["bytes_per_hour"]), mib(m["bytes_per_hour"]))
        row(f"{head}: bytes written per message (record = {s['record_bytes']} B, payload + head = "
            f"{s['payload_plus_head']} B)", t["bytes_per_msg"], m["bytes_per_msg"])
        row(f"{head}: bytes per message incl. start and exit", t["bytes_incl_exit_per_msg"], m["bytes_incl_exit_per_msg"])
        row(f"{head}: CPU (% of one core)", t["cpu_percent"], m["cpu_percent"])
        ti = s.get("tributary_interval")
        if ti:
            row(f"{head}: bytes written per hour (MiB), Tributary with wal.fsync interval", mib(ti["bytes_per_hour"]),
                mib(m["bytes_per_hour"]))
            row(f"{head}: bytes written per message, Tributary with wal.fsync interval", ti["bytes_per_msg"],
                m["bytes_per_msg"])
            row(f"{head}: CPU (% of one core), Tributary with wal.fsync interval", ti["cpu_percent"], m["cpu_percent"])
            row(f"{head}: arrived at the far side / acknowledged, Tributary with wal.fsync interval",
                f"{ti['arrived']:,} / {ti['acked']:,}", f"{m['arrived']:,} / {m['acked']:,}", rat=False)
        row(f"{head}: arrived at the far side / acknowledged", f"{t['arrived']:,} / {t['acked']:,}",
            f"{m['arrived']:,} / {m['acked']:,}", rat=False)
    o = r.get("outage")
    if o:
        t = o["tributary"]
        for name, label in (("mosquitto_default", "bridge defaults"), ("mosquitto_unlimited", "queue limit removed")):
            m = o[name]
            head = f"outage ({label})"
            row(f"{head}: far side down (s)", t["outage_s"], m["outage_s"])
            row(f"{head}: acknowledged by the edge and never arrived", "judged by tests/storeforward", m["missing"], rat=False)
            row(f"{head}: backlog drained (messages)", t["backlog"], m["backlog"])
            row(f"{head}: first delivery after the far side returned (s)", t["first_after_end_s"], m["first_after_end_s"])
            row(f"{head}: time to drain (s)", t["time_to_drain_s"], m["time_to_drain_s"])
            row(f"{head}: replay rate (msg/s)", t["replay_rate"], m.get("replay_rate"))
            row(f"{head}: replay rate / arrival rate ({o['arrival_rate']:,}/s)", t["replay_x_arrival"],
                m.get("replay_x_arrival"))
            row(f"{head}: edge memory at the end of the outage (MiB)", t["edge_rss_kib"] / 1024, m["edge_rss_kib"] / 1024)
            row(f"{head}: duplicates / out of order at the far side", "judged by tests/storeforward",
                f"{m['duplicates']:,} / {m['out_of_order']:,}", rat=False)
    i = r.get("idle")
    if i:
        t, m = i["tributary"], i["mosquitto"]
        row(f"{k['idle']:,} idle connections: RSS (MiB)", t["rss_after_kib"] / 1024, m["rss_after_kib"] / 1024)
        row(f"{k['idle']:,} idle connections: bytes per connection", t["bytes_per_conn"], m["bytes_per_conn"])
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(markdown(json.load(f)))
