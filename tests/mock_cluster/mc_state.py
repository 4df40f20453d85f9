"""mc_state.py: what the mock cluster knows, and the cluster's rules.

One object, ClusterState, behind one lock, holds everything the gRPC and
control fronts read or change: the schema registry, the topics, each edge's
registration, each topic's dedup marker and counters, and the Discovery
answer. The rules are the real cluster's as DANUBE-PROTOCOL.md ("How the
real cluster behaves") states them; where that page is silent the choice is
named here and in docs/MOCK-CLUSTER.md.

  Registration  a topic must be /{edge_name}/<name> (letters, digits, _ -),
                else it gets a per-topic error and is not created. A topic
                already known reports topic_created=false. No subject:
                resolved, no schema. Subject found: resolved + latest schema.
                Not found: unresolved, empty error. config_version is 1 for
                a new edge and +1 per re-registration. success is true.
  Versions      an edge's config_version also goes up by one when a subject
                one of its topics uses is added, changed or deleted, or one
                of its topics is removed (Danube bumps it the same way).
  Heartbeat     unknown edge: NotFound. Same version: changed=false.
                Otherwise each registered topic is compared with what the
                edge was last told: TOPIC_REMOVED, SCHEMA_REMOVED, or
                SCHEMA_UPDATED with the new schema. What was reported is then
                remembered as told (the cluster's view of the edge moves on).
  Replication   one marker per topic, the highest batch_last_offset stored.
                A batch at or below it is acked, not stored. A batch that
                crosses it is stored whole. An empty batch gets no ack. A
                message without msg_id refuses the batch (BadBatch). A store
                failure raises StorageError and leaves the marker alone.
                Batches for a topic nobody registered are accepted: the mock
                does not police the edge's bookkeeping here.
"""
import re
import threading
import time

import DanubeApi_pb2 as api_pb
import EdgeReplicator_pb2 as edge_pb

from mc_schemas import SchemaRegistry

TOPIC_RE = re.compile(r"^/[A-Za-z0-9_-]+/[A-Za-z0-9_-]+$")
LOOKUP_MODES = {"connect": api_pb.TopicLookupResponse.Connect,
                "redirect": api_pb.TopicLookupResponse.Redirect,
                "failed": api_pb.TopicLookupResponse.Failed}


class NotFound(Exception):
    pass


class BadBatch(Exception):
    pass


class StorageError(Exception):
    pass


class TopicView:
    """What an edge was last told about one of its topics."""
    __slots__ = ("subject", "fingerprint")

    def __init__(self, subject, fingerprint):
        self.subject = subject          # None: the topic has no subject
        self.fingerprint = fingerprint  # None: no schema told (unresolved or removed)


class EdgeState:
    __slots__ = ("name", "config_version", "registrations", "topics")

    def __init__(self, name):
        self.name = name
        self.config_version = 0
        self.registrations = 0
        self.topics = {}                # topic name -> TopicView


class TopicStats:
    __slots__ = ("stored", "highest_offset", "marker", "duplicate_batches",
                 "duplicate_messages", "batches", "empty_batches", "acks")

    def __init__(self):
        self.stored = 0
        self.highest_offset = None
        self.marker = None              # highest batch_last_offset stored
        self.duplicate_batches = 0
        self.duplicate_messages = 0
        self.batches = 0                # non-empty batches received
        self.empty_batches = 0
        self.acks = 0

    def to_json(self):
        return {name: getattr(self, name) for name in self.__slots__}


class ClusterState:
    def __init__(self, store, registry=None):
        self.lock = threading.Lock()
        self.registry = registry or SchemaRegistry()
        self.store = store
        self.topics = set()
        self.edges = {}
        self.stats = {}
        self.lookup_mode = "connect"
        self.lookup_url = None          # None: the mock's own address
        self.counters = {"streams_opened": 0, "streams_open": 0, "lookups": 0,
                         "silent_dropped_batches": 0, "storage_failures": 0,
                         "unauthenticated_calls": 0}

    # ---- registration and heartbeat -------------------------------------

    def register(self, req):
        with self.lock:
            edge = self.edges.get(req.edge_name)
            if edge is None:
                edge = self.edges[req.edge_name] = EdgeState(req.edge_name)
            edge.config_version += 1
            edge.registrations += 1
            edge.topics = {}
            resp = edge_pb.RegisterEdgeResponse(success=True, config_version=edge.config_version)
            prefix = "/" + req.edge_name + "/"
            for decl in req.topics:
                res = resp.topics.add(topic_name=decl.topic_name)
                if not decl.topic_name.startswith(prefix):
                    res.error = f"topic {decl.topic_name} is outside the edge namespace {prefix}"
                    continue
                if not TOPIC_RE.match(decl.topic_name):
                    res.error = f"invalid topic name {decl.topic_name}: want /namespace/topic"
                    continue
                res.topic_created = decl.topic_name not in self.topics
                self.topics.add(decl.topic_name)
                subject = decl.schema_subject if decl.HasField("schema_subject") else None
                view = edge.topics[decl.topic_name] = TopicView(subject, None)
                if subject is None:
                    res.schema_resolved = True
                    continue
                sv = self.registry.latest(subject)
                res.schema_resolved = sv is not None
                if sv is not None:
                    sv.fill(res.schema)
                    view.fingerprint = sv.fingerprint
            resp.message = f"edge {req.edge_name} registered {len(edge.topics)} topic(s)"
            return resp

    def heartbeat(self, req):
        with self.lock:
            edge = self.edges.get(req.edge_name)
            if edge is None:
                raise NotFound(f"edge {req.edge_name} is not registered")
            resp = edge_pb.EdgeHeartbeatResponse(config_version=edge.config_version)
            if req.config_version == edge.config_version:
                return resp
            resp.changed = True
            for name in sorted(edge.topics):
                view = edge.topics[name]
                if name not in self.topics:
                    resp.changes.add(topic_name=name, change_type=edge_pb.TOPIC_REMOVED,
                                     detail=f"topic {name} was deleted on the cluster")
                    del edge.topics[name]
                    continue
                if view.subject is None:
                    continue
                sv = self.registry.latest(view.subject)
                if sv is None and view.fingerprint is not None:
                    resp.changes.add(topic_name=name, change_type=edge_pb.SCHEMA_REMOVED,
                                     detail=f"subject {view.subject} was deleted")
                    view.fingerprint = None
                elif sv is not None and sv.fingerprint != view.fingerprint:
                    ch = resp.changes.add(topic_name=name, change_type=edge_pb.SCHEMA_UPDATED,
                                          detail=f"subject {view.subject} is now version {sv.version}")
                    sv.fill(ch.schema)
                    view.fingerprint = sv.fingerprint
            return resp

    def _bump_edges(self, uses):
        for edge in self.edges.values():
            if any(uses(name, view) for name, view in edge.topics.items()):
                edge.config_version += 1

    # ---- control-port changes -------------------------------------------

    def put_schema(self, spec):
        """Adds or changes a subject (SchemaError on a bad spec). Returns
        (SchemaVersion, changed)."""
        with self.lock:
            sv, changed = self.registry.put_spec(spec.get("subject"), spec)
            if changed:
                self._bump_edges(lambda n, v: v.subject == sv.subject)
            return sv, changed

    def delete_schema(self, subject):
        with self.lock:
            if not self.registry.delete(subject):
                return False
            self._bump_edges(lambda n, v: v.subject == subject)
            return True

    def delete_topic(self, name):
        with self.lock:
            if name not in self.topics:
                return False
            self.topics.discard(name)
            st = self.stats.get(name)
            if st is not None:
                st.marker = None        # Danube drops the replicated marker too
            self._bump_edges(lambda n, v: n == name)
            return True

    def reset_edge(self, name=None):
        """Forgets one edge (or all with None); returns how many were forgotten."""
        with self.lock:
            if name is None:
                n = len(self.edges)
                self.edges.clear()
                return n
            return 1 if self.edges.pop(name, None) is not None else 0

    def set_lookup(self, mode, url=None):
        if mode not in LOOKUP_MODES:
            raise ValueError(f"lookup mode must be one of {sorted(LOOKUP_MODES)}")
        with self.lock:
            self.lookup_mode = mode
            self.lookup_url = url

    def lookup(self, req, own_url):
        with self.lock:
            self.counters["lookups"] += 1
            mode, url = self.lookup_mode, self.lookup_url or own_url
        resp = api_pb.TopicLookupResponse(request_id=req.request_id,
                                          response_type=LOOKUP_MODES[mode])
        if mode != "failed":
            resp.connect_url = url
            resp.broker_url = url
        return resp

    # ---- replication ----------------------------------------------------

    def ingest(self, batch):
        """Stores a batch unless already stored. Returns the ReplicateAck to
        send, or None for an empty batch. Raises BadBatch, StorageError."""
        n = len(batch.messages)
        with self.lock:
            st = self.stats.get(batch.topic_name)
            if st is None:
                st = self.stats[batch.topic_name] = TopicStats()
            if n == 0:
                st.empty_batches += 1
                return None
            top = -1
            for i, m in enumerate(batch.messages):     # the hot loop: one pass
                if not m.HasField("msg_id"):
                    raise BadBatch(f"message {i} of the batch ending at {batch.batch_last_offset} "
                                   f"on {batch.topic_name} has no msg_id")
                off = m.msg_id.topic_offset
                if off > top:
                    top = off
            st.batches += 1
            if st.marker is not None and batch.batch_last_offset <= st.marker:
                st.duplicate_batches += 1
                st.duplicate_messages += n
            else:
                try:
                    self.store.append(batch, int(time.time() * 1000))
                except OSError as e:
                    self.counters["storage_failures"] += 1
                    raise StorageError(f"storing {batch.topic_name} up to "
                                       f"{batch.batch_last_offset} failed: {e}") from None
                st.marker = batch.batch_last_offset
                st.stored += n
                if st.highest_offset is None or top > st.highest_offset:
                    st.highest_offset = top
        return edge_pb.ReplicateAck(topic_name=batch.topic_name,
                                    acked_offset=batch.batch_last_offset)

    def count(self, key, delta=1):
        with self.lock:
            self.counters[key] += delta

    def count_ack(self, topic):
        with self.lock:
            self.stats[topic].acks += 1

    # ---- reports --------------------------------------------------------

    def stats_json(self):
        with self.lock:
            return {"store_mode": self.store.mode,
                    "topics": {t: s.to_json() for t, s in sorted(self.stats.items())},
                    "totals": {"stored": sum(s.stored for s in self.stats.values()),
                               "acks": sum(s.acks for s in self.stats.values()),
                               **self.counters}}

    def registrations_json(self):
        with self.lock:
            return {"edges": {e.name: {"config_version": e.config_version,
                                       "registrations": e.registrations,
                                       "topics": {n: {"subject": v.subject,
                                                      "fingerprint": v.fingerprint}
                                                  for n, v in sorted(e.topics.items())}}
                              for e in self.edges.values()},
                    "topics": sorted(self.topics)}
