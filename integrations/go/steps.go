package mockdcp

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

// Step is one step of mockdcp's scenario vocabulary, as POST /mock/steps takes it: a
// JSON object with one member, the step's name, whose value holds the step's fields.
//
//	mockdcp.Step{Name: "persist", Fields: map[string]any{"upto": 40}}   // {"persist": {"upto": 40}}
//
// The constructors below build the common steps; With adds a field any step takes
// (see the scenario schema, mockdcp/scenario/scenario.schema.json, for every step and
// field). The server checks a whole list before it applies any of it.
type Step struct {
	Name   string
	Fields map[string]any
}

// NewStep returns the step name with these fields (nil: none).
func NewStep(name string, fields map[string]any) Step {
	return Step{Name: name, Fields: fields}
}

// With returns a copy of the step with field set to value.
func (s Step) With(field string, value any) Step {
	fields := make(map[string]any, len(s.Fields)+1)
	maps.Copy(fields, s.Fields)
	fields[field] = value
	return Step{Name: s.Name, Fields: fields}
}

// MarshalJSON encodes the step as {"name": {fields}}.
func (s Step) MarshalJSON() ([]byte, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("mockdcp: a step without a name")
	}
	fields := s.Fields
	if fields == nil {
		fields = map[string]any{}
	}
	return json.Marshal(map[string]any{s.Name: fields})
}

// UnmarshalJSON decodes {"name": {fields}} (or {"name": null}).
func (s *Step) UnmarshalJSON(data []byte) error {
	var m map[string]map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("mockdcp: a step is an object with one member: %w", err)
	}
	if len(m) != 1 {
		return fmt.Errorf("mockdcp: a step is an object with one member, got %d", len(m))
	}
	for name, fields := range m {
		*s = Step{Name: name, Fields: fields}
	}
	return nil
}

func (s Step) String() string {
	b, err := s.MarshalJSON()
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// withVBuckets returns the step with "vbuckets" when any are given (none: the
// step's default, every vbucket).
func withVBuckets(name string, vbuckets []int) Step {
	s := Step{Name: name, Fields: map[string]any{}}
	switch len(vbuckets) {
	case 0:
	case 1:
		s.Fields["vbuckets"] = vbuckets[0]
	default:
		s.Fields["vbuckets"] = vbuckets
	}
	return s
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// -- data

// Set writes a document to the default collection (With("collection",
// "scope.name") for another). value is sent as JSON: a string is stored as is, a
// []byte as its text, json.RawMessage and anything else json.Marshal encodes (maps,
// structs) are stored as compact JSON.
func Set(key string, value any) Step {
	switch v := value.(type) {
	case json.RawMessage: // JSON as given
	case []byte:
		value = string(v)
	}
	return Step{Name: "set", Fields: map[string]any{"key": key, "value": value}}
}

// Delete deletes a live document: a tombstone at the next seqno of its vbucket.
func Delete(key string) Step { return Step{Name: "delete", Fields: map[string]any{"key": key}} }

// Expire expires a live document now, as the expiry pager does.
func Expire(key string) Step { return Step{Name: "expire", Fields: map[string]any{"key": key}} }

// Generate writes docs seeded Faker documents, keys doc::000000 on (With("prefix",
// ...), With("start", n), With("collection", ...) change that).
func Generate(docs int) Step { return Step{Name: "generate", Fields: map[string]any{"docs": docs}} }

// -- storage

// Checkpoint closes the open checkpoint of the vbuckets (none: all).
func Checkpoint(vbuckets ...int) Step { return withVBuckets("checkpoint", vbuckets) }

// Persist writes everything so far in the vbuckets (none: all) to disk
// (With("upto", seqno) for less).
func Persist(vbuckets ...int) Step { return withVBuckets("persist", vbuckets) }

// Persistence holds (paused) or releases the background flusher: while it is held,
// writes stay unpersisted and a Failover or Restart loses them.
func Persistence(paused bool) Step {
	return Step{Name: "persistence", Fields: map[string]any{"paused": paused}}
}

// Purge purges the persisted tombstones of the vbuckets (none: all).
func Purge(vbuckets ...int) Step { return withVBuckets("purge", vbuckets) }

// DropCursor is the memory-to-disk switch: the streams of the vbuckets (none: all)
// backfill from disk.
func DropCursor(vbuckets ...int) Step { return withVBuckets("drop_cursor", vbuckets) }

// Restart is an unclean node restart: unpersisted items of the vbuckets (none: all)
// are lost, and every connection drops.
func Restart(vbuckets ...int) Step { return withVBuckets("restart", vbuckets) }

// -- cluster

// Failover fails the vbuckets (none: all) over to a replica: unpersisted items are
// lost, a new branch starts, the vbuckets' streams end with STATE_CHANGED.
func Failover(vbuckets ...int) Step { return withVBuckets("failover", vbuckets) }

// MoveVbucket moves the vbuckets away (NOT_MY_VBUCKET, a new config revision).
func MoveVbucket(vbuckets ...int) Step { return withVBuckets("move_vbucket", vbuckets) }

// Flush flushes the bucket: every vbucket emptied, new failover tables.
func Flush() Step { return Step{Name: "flush", Fields: map[string]any{}} }

// CreateScope creates a scope.
func CreateScope(name string) Step {
	return Step{Name: "create_scope", Fields: map[string]any{"name": name}}
}

// CreateCollection creates "scope.name".
func CreateCollection(collection string) Step {
	return Step{Name: "create_collection", Fields: map[string]any{"collection": collection}}
}

// DropCollection drops "scope.name".
func DropCollection(collection string) Step {
	return Step{Name: "drop_collection", Fields: map[string]any{"collection": collection}}
}

// -- users

// CreateUser creates a local user with roles, comma separated as ns_server spells
// them ("data_dcp_reader[default]", "admin"), or gives an existing one these roles.
func CreateUser(name, password, roles string) Step {
	return Step{Name: "create_user", Fields: map[string]any{"name": name, "password": password, "roles": roles}}
}

// DeleteUser deletes a user: its connections stay, its next login fails.
func DeleteUser(name string) Step {
	return Step{Name: "delete_user", Fields: map[string]any{"name": name}}
}

// Grant gives a user more roles.
func Grant(user, roles string) Step {
	return Step{Name: "grant", Fields: map[string]any{"user": user, "roles": roles}}
}

// Revoke takes roles from a user: its streams that lose DcpStream end
// LOST_PRIVILEGES at their next snapshot marker, its DCP connections that lose
// DcpProducer are closed.
func Revoke(user, roles string) Step {
	return Step{Name: "revoke", Fields: map[string]any{"user": user, "roles": roles}}
}

// ChangePassword sets a user's password: nothing drops, the next login with the old
// one fails.
func ChangePassword(user, password string) Step {
	return Step{Name: "change_password", Fields: map[string]any{"user": user, "password": password}}
}

// DropScope drops a scope and every collection in it.
func DropScope(name string) Step {
	return Step{Name: "drop_scope", Fields: map[string]any{"name": name}}
}

// CreateBucket makes a bucket on every node (With("storage", "magma"),
// With("flush_enabled", true)...); a name deleted before comes back new: new vbucket
// uuids, seqnos from 0. Any step takes With("bucket", name) to act on that bucket.
func CreateBucket(name string) Step {
	return Step{Name: "create_bucket", Fields: map[string]any{"name": name}}
}

// DeleteBucket deletes a bucket: every connection to it closes.
func DeleteBucket(name string) Step {
	return Step{Name: "delete_bucket", Fields: map[string]any{"name": name}}
}

// -- faults

// Disconnect drops every connection (With("connection", dcpName) for one).
func Disconnect() Step { return Step{Name: "disconnect", Fields: map[string]any{}} }

// EndStream ends the live streams of the vbuckets (none: all) with STREAM_END of
// reason: "ok", "closed", "state_changed", "disconnected", "too_slow",
// "backfill_failed", "rollback", "filter_empty" or "lost_privileges".
func EndStream(reason string, vbuckets ...int) Step {
	return withVBuckets("end_stream", vbuckets).With("reason", reason)
}

// -- control

// High stands for each vbucket's high seqno in ConsumerProgress.Seqno.
const High = "high"

// ConsumerProgress is what WaitFor waits for: every condition given, together.
type ConsumerProgress struct {
	// VBuckets the seqno, streams and rollback conditions are about (nil: all).
	VBuckets []int
	// Seqno: every frame up to this seqno (an integer, or High) written to the
	// consumer on each of the vbuckets; nil: no seqno condition.
	Seqno any
	// Acked: ... and acknowledged (flow control).
	Acked bool
	// Connections: at least this many connections open (0: no condition).
	Connections int
	// Streams: a stream opened on each of the vbuckets.
	Streams bool
	// BytesAcked: at least this many bytes acknowledged (0: no condition).
	BytesAcked int
	// Rollback: a rollback taken on each of the vbuckets.
	Rollback bool
	// Connection: only connections with this DCP name count ("": all).
	Connection string
}

// Wait waits d.
func Wait(d time.Duration) Step {
	return Step{Name: "wait", Fields: map[string]any{"seconds": seconds(d)}}
}

// WaitFor waits until the consumer's progress meets p, failing the step list after
// timeout (0: the server's default, 60 s). A seqno wait holds those streams right
// after that frame until the steps after the wait have run.
func WaitFor(p ConsumerProgress, timeout time.Duration) Step {
	c := map[string]any{}
	switch len(p.VBuckets) {
	case 0:
	case 1:
		c["vbucket"] = p.VBuckets[0]
	default:
		c["vbucket"] = p.VBuckets
	}
	if p.Seqno != nil {
		c["seqno"] = p.Seqno
	}
	if p.Acked {
		c["acked"] = true
	}
	if p.Connections > 0 {
		c["connections"] = p.Connections
	}
	if p.Streams {
		c["streams"] = true
	}
	if p.BytesAcked > 0 {
		c["bytes_acked"] = p.BytesAcked
	}
	if p.Rollback {
		c["rollback"] = true
	}
	if p.Connection != "" {
		c["connection"] = p.Connection
	}
	s := Step{Name: "wait", Fields: map[string]any{"consumer": c}}
	if timeout > 0 {
		s.Fields["timeout"] = seconds(timeout)
	}
	return s
}

// ExpectRollback expects that the server answered ROLLBACK on vbucket and the
// consumer then re-requested it at or below the rollback seqno, within 10 s
// (With("within", seconds) to change).
func ExpectRollback(vbucket int) Step {
	return Step{Name: "expect", Fields: map[string]any{"rollback": map[string]any{"vbucket": vbucket}}}
}

// ExpectReconnected expects a new DCP connection after the last one closed.
func ExpectReconnected() Step {
	return Step{Name: "expect", Fields: map[string]any{"reconnected": true}}
}

// Label names this point of the step list (State().Scenario.Label).
func Label(name string) Step { return Step{Name: "label", Fields: map[string]any{"name": name}} }
