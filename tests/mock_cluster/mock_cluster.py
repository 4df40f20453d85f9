#!/usr/bin/python3
"""mock_cluster.py: a Danube cluster, as much of it as an edge talks to.

A test double for Tributary's replicator and gateway tests: it speaks the
real gRPC contract (proto/*.proto, Danube's field numbers), follows the
cluster's rules for registration, heartbeat schema sync, dedup and acks
(mc_state.py), stores what it receives where a test can read it
(mc_store.py), and plays faults on command (mc_faults.py, mc_control.py).
Python because it is a test tool: grpcio and protobuf are Debian packages,
and the figures in docs/MOCK-CLUSTER.md say how far it keeps up.

Start-up prints exactly one line on stdout, then flushes:
  mock-cluster listening grpc=HOST:PORT control=127.0.0.1:PORT
(ports chosen by the kernel when 0 is asked). SIGTERM or SIGINT stops both
servers and exits 0. Logs go to stderr. Run it with /usr/bin/python3 (or the
tributary-mock-cluster launcher), which has Debian's grpcio.

Files: mc_schemas.py (registry), mc_state.py (rules and counters),
mc_store.py (JSON lines or counting), mc_faults.py (fault modes),
mc_grpc.py (gRPC services), mc_control.py (HTTP control port).
"""
import argparse
import logging
import os
import signal
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(prog="tributary-mock-cluster",
                                description="Mock Danube cluster for Tributary tests.")
    p.add_argument("--host", default="127.0.0.1", help="gRPC bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=6650, help="gRPC port, 0 picks one (default 6650)")
    p.add_argument("--control", type=int, default=0, metavar="PORT",
                   help="control HTTP port on 127.0.0.1, 0 picks one (default 0)")
    p.add_argument("--token", help="require 'authorization: Bearer TOKEN' on every call")
    p.add_argument("--schemas", metavar="FILE",
                   help="JSON object: subject -> {type, raw, compatibility_mode?, message_name?}")
    p.add_argument("--store", metavar="FILE", help="append stored messages as JSON lines here")
    p.add_argument("--store-mode", choices=("jsonl", "count"),
                   help="jsonl (needs --store; the default with --store) or count "
                        "(counters only; the default without --store)")
    p.add_argument("--fault", default="normal",
                   choices=("normal", "refuse", "silent", "unavailable", "internal"),
                   help="fault mode at start (default normal)")
    p.add_argument("--ack-delay-ms", type=int, default=0, metavar="N",
                   help="delay every ack by N ms (default 0)")
    p.add_argument("--lookup", default="connect", choices=("connect", "redirect", "failed"),
                   help="TopicLookup answer (default connect)")
    p.add_argument("--lookup-url", metavar="URL",
                   help="URL in TopicLookup answers (default http://HOST:PORT of this mock)")
    p.add_argument("--proto-py", metavar="DIR",
                   help="directory of DanubeApi_pb2.py and EdgeReplicator_pb2.py "
                        "(default: $TRIB_MOCK_PROTO_PY)")
    p.add_argument("--workers", type=int, default=64,
                   help="gRPC worker threads; each open stream or hung call holds one (default 64)")
    p.add_argument("--verbose", action="store_true", help="log registrations, heartbeats, streams, faults and control requests")
    args = p.parse_args(argv)
    if args.store_mode is None:
        args.store_mode = "jsonl" if args.store else "count"
    if args.store_mode == "jsonl" and not args.store:
        p.error("--store-mode jsonl needs --store FILE")
    if args.store_mode == "count" and args.store:
        p.error("--store-mode count writes no file: drop --store")
    if args.ack_delay_ms < 0:
        p.error("--ack-delay-ms must be >= 0")
    args.proto_py = args.proto_py or os.environ.get("TRIB_MOCK_PROTO_PY")
    if not args.proto_py or not os.path.isfile(os.path.join(args.proto_py, "EdgeReplicator_pb2.py")):
        p.error("cannot find the generated Python modules: give --proto-py DIR "
                "(the build tree's proto_py/) or use the tributary-mock-cluster launcher")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(stream=sys.stderr, format="mock-cluster %(levelname)s %(message)s",
                        level=logging.DEBUG if args.verbose else logging.WARNING)
    sys.path.insert(0, os.path.abspath(args.proto_py))

    # Imported only now: they need the generated modules on sys.path.
    from mc_control import ControlServer
    from mc_faults import Faults
    from mc_grpc import GrpcFront
    from mc_schemas import SchemaError, SchemaRegistry
    from mc_state import ClusterState
    from mc_store import CountStore, JsonlStore

    registry = SchemaRegistry()
    try:
        if args.schemas:
            registry.load_file(args.schemas)
        store = JsonlStore(args.store) if args.store_mode == "jsonl" else CountStore()
    except (OSError, SchemaError) as e:
        print(f"mock-cluster: {e}", file=sys.stderr)
        return 2
    state = ClusterState(store, registry)
    state.set_lookup(args.lookup, args.lookup_url)
    faults = Faults(args.fault, args.ack_delay_ms)
    front = GrpcFront(state, faults, args.host, args.port, args.token, args.workers)

    # Block the stop signals in every thread (threads inherit the mask, and
    # grpc starts its own) and take them with sigwait below. A Python handler
    # would only run once the kernel picked the main thread to deliver to,
    # which it need not do: a SIGTERM landing on a grpc thread went unseen.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        front.start()                   # binds even under "refuse", to learn the port
        front.apply_fault()
        control = ControlServer(state, faults, front, args.control)
    except (OSError, RuntimeError) as e:
        print(f"mock-cluster: {e}", file=sys.stderr)
        front.stop(None)
        return 2
    control.start()
    print(f"mock-cluster listening grpc={args.host}:{front.port} control=127.0.0.1:{control.port}",
          flush=True)

    signal.sigwait(stop_signals)
    front.stop(0.2)                     # open calls get 0.2 s, then are cancelled
    control.stop()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
