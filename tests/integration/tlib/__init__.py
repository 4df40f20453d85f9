"""tlib: shared helpers for Tributary's integration tests.

  tlib.mock         start/stop the mock Danube cluster, its control port,
                    its JSON-lines store, and bounded waits
  tlib.edge_client  a gRPC client speaking the edge's side of the contract
  tlib.tls          certificates made with the openssl command, and the
                    suite's TLS switch: with TRIB_MQTT_TLS=1 every Gateway's
                    plain MQTT listener is a TLS one and every client of
                    tlib (mqttraw.Raw, paho, mosquitto_pub, loadgen) speaks
                    TLS to it, trusting the suite's CA

Tests run with /usr/bin/python3 (Debian's grpcio/protobuf) and find the
build tree through $TRIB_BUILD_DIR, which ctest sets.
"""
