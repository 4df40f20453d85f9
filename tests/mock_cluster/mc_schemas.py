"""mc_schemas.py: the mock cluster's schema registry.

What the edge sees of Danube's registry is a ResolvedSchema: subject, a
schema id unique across the registry, a version counted per subject, the
type name, the definition as Danube's externally tagged JSON envelope, a
"sha256:<hex>" fingerprint of the raw schema text, and the compatibility
mode. This module keeps exactly that and nothing of Danube's compatibility
checking: the mock accepts any new version, so tests can push a breaking
change at an edge on purpose.

Shape: plain objects, no locking. ClusterState (mc_state.py) owns the one
lock and calls in here while holding it. Versions are never reused: a
subject deleted and added again continues its count, so an edge never sees
two different schemas under one (subject, version).
"""
import hashlib
import json

# schema_type -> envelope tag (None: the envelope is a bare string)
TYPES = {
    "json_schema": "JsonSchema",
    "avro": "Avro",
    "protobuf": "Protobuf",
    "bytes": "Bytes",
    "string": "String",
    "number": "Number",
}
BARE = {"bytes", "string", "number"}


class SchemaError(ValueError):
    """A schema given to the registry is malformed (bad type, bad raw)."""


def fingerprint(raw):
    return "sha256:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()


class SchemaVersion:
    """One immutable registered version of a subject."""

    __slots__ = ("subject", "schema_id", "version", "schema_type", "raw",
                 "fingerprint", "compatibility_mode", "message_name")

    def __init__(self, subject, schema_id, version, schema_type, raw,
                 compatibility_mode, message_name):
        self.subject = subject
        self.schema_id = schema_id
        self.version = version
        self.schema_type = schema_type
        self.raw = raw
        self.fingerprint = fingerprint(raw)
        self.compatibility_mode = compatibility_mode
        self.message_name = message_name

    def definition(self):
        """Danube's envelope, compact JSON, fields in Danube's order."""
        tag = TYPES[self.schema_type]
        if self.schema_type in BARE:
            env = tag
        elif self.schema_type == "protobuf":
            env = {tag: {"raw_proto": self.raw, "message_name": self.message_name,
                         "fingerprint": self.fingerprint}}
        else:
            env = {tag: {"raw_schema": self.raw, "fingerprint": self.fingerprint}}
        return json.dumps(env, separators=(",", ":")).encode("utf-8")

    def fill(self, resolved):
        """Fills a danube.edge.ResolvedSchema message in place."""
        resolved.subject = self.subject
        resolved.schema_id = self.schema_id
        resolved.schema_version = self.version
        resolved.schema_type = self.schema_type
        resolved.schema_definition = self.definition()
        resolved.fingerprint = self.fingerprint
        resolved.compatibility_mode = self.compatibility_mode

    def to_json(self):
        return {"subject": self.subject, "schema_id": self.schema_id,
                "version": self.version, "type": self.schema_type,
                "raw": self.raw, "fingerprint": self.fingerprint,
                "compatibility_mode": self.compatibility_mode}


def normalise_raw(schema_type, raw):
    """The raw schema as text. JSON Schema and Avro may be given as JSON
    values (objects) for convenience; they are stored as compact JSON text,
    which is what the fingerprint covers."""
    if raw is None:
        if schema_type in BARE:
            return ""
        raise SchemaError(f"a {schema_type} schema needs 'raw'")
    if isinstance(raw, str):
        return raw
    if schema_type in ("json_schema", "avro"):
        return json.dumps(raw, separators=(",", ":"))
    raise SchemaError(f"'raw' of a {schema_type} schema must be a string")


class SchemaRegistry:
    def __init__(self):
        self._latest = {}        # subject -> SchemaVersion
        self._counts = {}        # subject -> last version number handed out
        self._next_id = 1

    def put(self, subject, schema_type, raw=None, compatibility_mode="backward",
            message_name=""):
        """Registers raw as the subject's latest version. Returns
        (SchemaVersion, changed): an identical schema (same type and
        fingerprint) is not a new version. Raises SchemaError."""
        if not isinstance(subject, str) or not subject:
            raise SchemaError("'subject' must be a non-empty string")
        if schema_type not in TYPES:
            raise SchemaError(f"unknown type {schema_type!r}; one of {sorted(TYPES)}")
        raw = normalise_raw(schema_type, raw)
        cur = self._latest.get(subject)
        if (cur is not None and cur.schema_type == schema_type
                and cur.fingerprint == fingerprint(raw)
                and cur.compatibility_mode == compatibility_mode
                and cur.message_name == message_name):
            return cur, False
        version = self._counts.get(subject, 0) + 1
        sv = SchemaVersion(subject, self._next_id, version, schema_type, raw,
                           compatibility_mode, message_name)
        self._next_id += 1
        self._counts[subject] = version
        self._latest[subject] = sv
        return sv, True

    def put_spec(self, subject, spec):
        """put() from a JSON object {type, raw, compatibility_mode?, message_name?}."""
        if not isinstance(spec, dict):
            raise SchemaError(f"{subject}: expected an object with 'type' and 'raw'")
        return self.put(subject, spec.get("type"), spec.get("raw"),
                        spec.get("compatibility_mode", "backward"),
                        spec.get("message_name", ""))

    def delete(self, subject):
        """Removes the subject; returns False if it was not there."""
        return self._latest.pop(subject, None) is not None

    def latest(self, subject):
        return self._latest.get(subject)

    def load_file(self, path):
        """Loads {subject: {type, raw, ...}} from a JSON file. Raises
        SchemaError (with the file name) or OSError."""
        with open(path, encoding="utf-8") as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as e:
                raise SchemaError(f"{path}: {e}") from None
        if not isinstance(doc, dict):
            raise SchemaError(f"{path}: expected an object of subject -> schema")
        for subject, spec in doc.items():
            try:
                self.put_spec(subject, spec)
            except SchemaError as e:
                raise SchemaError(f"{path}: {subject}: {e}") from None

    def to_json(self):
        return {s: v.to_json() for s, v in sorted(self._latest.items())}
