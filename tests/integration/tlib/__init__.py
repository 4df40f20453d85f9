"""tlib: shared helpers for Tributary's integration tests.

  tlib.mock         start/stop the mock Danube cluster, its control port,
                    its JSON-lines store, and bounded waits
  tlib.edge_client  a gRPC client speaking the edge's side of the contract

Tests run with /usr/bin/python3 (Debian's grpcio/protobuf) and find the
build tree through $TRIB_BUILD_DIR, which ctest sets.
"""
