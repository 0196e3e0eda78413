// Package harness holds what both interop consumers share: the command
// line, the JSON-lines event writer, the document/vbucket state and the
// stop conditions (stdin EOF, SIGTERM).
package harness

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// ---------------------------------------------------------------- options

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// Options is the common command line of both consumers.
type Options struct {
	Host             string
	KVPort           int
	HTTPPort         int
	User             string
	Password         string
	Bucket           string
	Out              string
	State            string
	Collections      bool
	CollectionFilter []string
	// Scope: a scope filter (every collection of the scope, also those created
	// later); with CollectionFilter, go-dcp's scopeName.
	Scope string
	// Streams (gocbcore only): one stream per vbucket per entry, with stream
	// ids 1, 2, ... (enable_stream_id); an entry is a comma-separated list of
	// scope.collection names or ids, or "scope:NAME".
	Streams        []string
	FlowControl    int
	VBuckets       string
	ResumeFrom     string
	ExpiryOpcode   bool
	Name           string
	ConnectTimeout time.Duration
	Verbose        bool
	NoStdin        bool
	// go-dcp only: the README configuration (default membership and metadata,
	// rollback mitigation, health check and API on); APIPort for its API.
	ReadmeConfig bool
	APIPort      int
	// gocbcore only: compression negotiated, values passed on as received.
	DisableDecompression bool
	// gocbcore only: DCPConfig.UseChangeStreams (DCP_CONTROL change_streams=true,
	// history snapshots on a Magma bucket; the connection fails if refused).
	ChangeStreams bool
	// TLSCA: TLS on, the node's certificate checked against this CA (PEM);
	// --kv-port and --http-port are then the TLS ports.
	TLSCA string
	// gocbcore only: authenticate with this client certificate and key (PEM)
	// instead of the password (no SASL).
	ClientCert string
	ClientKey  string
	// Output: the live documents as JSON lines in the columns mockdcp's pipeline
	// verify reads (mockdcp check's MOCKDCP_OUTPUT), rewritten as they change.
	Output string
	// Progress: how far Output goes (mockdcp check's MOCKDCP_PROGRESS), written
	// after each write of it: per vbucket the uuid its position is on and the
	// seqno the documents hold through (mockdcp/client/_output.py
	// write_progress), so that check takes a matching output as final at once.
	Progress string
	// Env: what the command line does not give comes from the MOCKDCP_*
	// variables mockdcp check and mockdcp run set (stdin is then ignored).
	Env bool
	// NoopInterval (seconds) from MOCKDCP_NOOP_INTERVAL: neither gocbcore nor
	// go-dcp can set it (gocbcore sends set_noop_interval 180), so it is only
	// reported.
	NoopInterval string
	// go-dcp only, with ReadmeConfig: static membership (1 of 1) and the
	// checkpoints in a file of its own, so go-dcp writes nothing into the bucket.
	OutsideBucket bool
}

// ParseFlags parses os.Args. Usage errors exit with status 2.
func ParseFlags(prog, defaultName string) *Options {
	o := &Options{}
	fs := flag.NewFlagSet(prog, flag.ExitOnError)
	fs.StringVar(&o.Host, "host", "127.0.0.1", "server address")
	fs.IntVar(&o.KVPort, "kv-port", 0, "KV (memcached) port")
	fs.IntVar(&o.HTTPPort, "http-port", 0, "management (HTTP) port")
	fs.StringVar(&o.User, "user", "Administrator", "user name")
	fs.StringVar(&o.Password, "password", "password", "password")
	fs.StringVar(&o.Bucket, "bucket", "default", "bucket name")
	fs.StringVar(&o.Out, "out", "", "events file (JSON lines); required")
	fs.StringVar(&o.State, "state", "", "state file written on stop")
	fs.BoolVar(&o.Collections, "collections", false, "collection-aware connection (HELLO COLLECTIONS)")
	var colls multiFlag
	fs.Var(&colls, "collection", "stream only scope.collection (repeatable); a number is taken as a collection id")
	fs.StringVar(&o.Scope, "scope", "", "stream only this scope (a scope filter)")
	var streams multiFlag
	fs.Var(&streams, "stream", "gocbcore: one more stream per vbucket with its own stream id and this filter (repeatable): s.c,s.c2 or scope:NAME")
	fs.IntVar(&o.FlowControl, "flow-control", 0, "DCP buffer size in bytes (0 = client default)")
	fs.StringVar(&o.VBuckets, "vbuckets", "all", "all or a comma-separated list of vbucket ids")
	fs.StringVar(&o.ResumeFrom, "resume-from", "", "state file to resume from")
	fs.BoolVar(&o.ExpiryOpcode, "expiry-opcode", false, "ask for DCP_EXPIRATION (enable_expiry_opcode)")
	fs.StringVar(&o.Name, "name", defaultName, "DCP connection / group name")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", 20*time.Second, "bootstrap deadline")
	fs.BoolVar(&o.Verbose, "verbose", false, "verbose client logging on stderr")
	fs.BoolVar(&o.NoStdin, "no-stdin", false, "do not stop on stdin EOF (stop only on SIGTERM/SIGINT)")
	fs.BoolVar(&o.ReadmeConfig, "readme-config", false, "go-dcp: its README configuration (membership, metadata, mitigation, health check, API)")
	fs.IntVar(&o.APIPort, "api-port", 0, "go-dcp: API port with --readme-config (0 = go-dcp's default 8080)")
	fs.BoolVar(&o.DisableDecompression, "disable-decompression", false, "gocbcore: CompressionConfig{Enabled, DisableDecompression}")
	fs.BoolVar(&o.ChangeStreams, "change-streams", false, "gocbcore: DCPConfig.UseChangeStreams (DCP_CONTROL change_streams=true)")
	fs.StringVar(&o.TLSCA, "tls-ca", "", "TLS: trust this CA (PEM); the ports are the TLS ports")
	fs.StringVar(&o.ClientCert, "client-cert", "", "gocbcore: client certificate (PEM; needs --tls-ca and --client-key)")
	fs.StringVar(&o.ClientKey, "client-key", "", "gocbcore: the client certificate's key (PEM)")
	fs.StringVar(&o.Output, "output", "", "keep the live documents in FILE as JSON lines (mockdcp check's MOCKDCP_OUTPUT)")
	fs.StringVar(&o.Progress, "progress", "", "with --output: write how far it goes to FILE (mockdcp check's MOCKDCP_PROGRESS)")
	fs.BoolVar(&o.Env, "env", false, "take what is not given from MOCKDCP_* (mockdcp check/run); implies --no-stdin")
	fs.BoolVar(&o.OutsideBucket, "outside-bucket", false, "go-dcp with --readme-config: static membership and file metadata (nothing written into the bucket)")
	_ = fs.Parse(os.Args[1:])
	if o.Env {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		fromEnvironment(prog, o, set)
	}
	o.CollectionFilter = colls
	o.Streams = streams
	if fs.NArg() > 0 {
		Usage(prog, "unexpected arguments: %v", fs.Args())
	}
	if o.Out == "" && o.Output == "" {
		Usage(prog, "--out or --output is required")
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 20 * time.Second
	}
	if (o.ClientCert != "") != (o.ClientKey != "") || (o.ClientCert != "" && o.TLSCA == "") {
		Usage(prog, "--client-cert and --client-key go together, with --tls-ca")
	}
	return o
}

// fromEnvironment fills what the command line did not set from the variables
// mockdcp check and mockdcp run give a consumer command
// (mockdcp/cli/_scenario_commands.py consumer_env, and the scenario's
// consumer settings MOCKDCP_BUFFER_SIZE and MOCKDCP_NOOP_INTERVAL).
func fromEnvironment(prog string, o *Options, set map[string]bool) {
	str := func(flagName, env string, dst *string) {
		if v, ok := os.LookupEnv(env); ok && !set[flagName] {
			*dst = v
		}
	}
	num := func(flagName, env string, dst *int) {
		if v, ok := os.LookupEnv(env); ok && !set[flagName] {
			n, err := strconv.Atoi(v)
			if err != nil {
				Usage(prog, "%s=%q: not a number", env, v)
			}
			*dst = n
		}
	}
	str("host", "MOCKDCP_HOST", &o.Host)
	num("kv-port", "MOCKDCP_KV_PORT", &o.KVPort)
	num("http-port", "MOCKDCP_HTTP_PORT", &o.HTTPPort)
	str("user", "MOCKDCP_USER", &o.User)
	str("password", "MOCKDCP_PASSWORD", &o.Password)
	str("bucket", "MOCKDCP_BUCKET", &o.Bucket)
	str("output", "MOCKDCP_OUTPUT", &o.Output)
	str("progress", "MOCKDCP_PROGRESS", &o.Progress)
	num("flow-control", "MOCKDCP_BUFFER_SIZE", &o.FlowControl)
	o.NoopInterval = os.Getenv("MOCKDCP_NOOP_INTERVAL")
	o.NoStdin = true // mockdcp check and run stop their consumer with SIGTERM
}

// Usage reports a command-line error and exits 2.
func Usage(prog, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", prog, fmt.Sprintf(format, args...))
	os.Exit(2)
}

// VBucketList returns the vbuckets to stream out of numVBs.
func (o *Options) VBucketList(numVBs int) ([]uint16, error) {
	if o.VBuckets == "" || o.VBuckets == "all" {
		out := make([]uint16, numVBs)
		for i := range out {
			out[i] = uint16(i)
		}
		return out, nil
	}
	var out []uint16
	seen := map[uint16]bool{}
	for _, p := range strings.Split(o.VBuckets, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (numVBs > 0 && n >= numVBs) {
			return nil, fmt.Errorf("bad vbucket %q (bucket has %d vbuckets)", p, numVBs)
		}
		if !seen[uint16(n)] {
			seen[uint16(n)] = true
			out = append(out, uint16(n))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty --vbuckets list")
	}
	return out, nil
}

// ---------------------------------------------------------------- events

// Events writes one JSON object per line; every line is written with a
// single unbuffered write(2), so readers see complete lines at once.
type Events struct {
	mu sync.Mutex
	f  *os.File
}

// OpenEvents opens the events file; "" keeps no events.
func OpenEvents(path string) (*Events, error) {
	if path == "" {
		return &Events{}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &Events{f: f}, nil
}

// Emit writes {"event":name, k1:v1, k2:v2, ...} keeping the field order.
func (e *Events) Emit(name string, kv ...any) {
	var b bytes.Buffer
	b.WriteString(`{"event":`)
	writeJSON(&b, name)
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteByte(',')
		writeJSON(&b, fmt.Sprint(kv[i]))
		b.WriteByte(':')
		writeJSON(&b, kv[i+1])
	}
	b.WriteString("}\n")
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return
	}
	if _, err := e.f.Write(b.Bytes()); err != nil {
		fmt.Fprintf(os.Stderr, "write events: %v\n", err)
	}
}

func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f != nil {
		_ = e.f.Close()
		e.f = nil
	}
}

func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.WriteString(`null`)
		return
	}
	b.Truncate(b.Len() - 1) // Encode appends '\n'
}

// Value returns the fields describing a document body: "value" as UTF-8
// text, plus "value_b64" when the body is not valid UTF-8.
func Value(v []byte) []any {
	if utf8.Valid(v) {
		return []any{"value", string(v)}
	}
	return []any{"value", string(bytes.ToValidUTF8(v, []byte("\uFFFD"))),
		"value_b64", base64.StdEncoding.EncodeToString(v)}
}

// ---------------------------------------------------------------- state

type Version struct {
	Seqno   uint64
	VB      uint16
	Value   string
	Deleted bool
	Rev     uint64
	Cas     uint64
}

type collectionName struct {
	scope uint32
	// scopeName: the scope by name, when the events give no scope id (go-dcp)
	scopeName string
	name      string
}

type VBState struct {
	Seqno     uint64 `json:"seqno"`
	UUID      uint64 `json:"uuid"`
	SnapStart uint64 `json:"snap_start"`
	SnapEnd   uint64 `json:"snap_end"`
}

// State keeps every version of every document seen, per (collection, key).
type State struct {
	mu   sync.Mutex
	docs map[string][]Version
	vbs  map[uint16]*VBState
	// names from the system events (or the events' collection names)
	collections map[uint32]collectionName
	scopes      map[uint32]string
	// changes counts what moved the documents (--output rewrites when it did)
	changes uint64
	// consistent: per vbucket, the seqnos at which the documents held were a
	// whole snapshot's (0, then each snapshot's end once reached), ascending
	consistent map[uint16][]uint64
}

func NewState() *State {
	return &State{docs: map[string][]Version{}, vbs: map[uint16]*VBState{},
		collections: map[uint32]collectionName{}, scopes: map[uint32]string{0: "_default"},
		consistent: map[uint16][]uint64{}}
}

// NameCollection records a collection's scope and name (a creation event).
func (s *State) NameCollection(id, scope uint32, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.collections[id] = collectionName{scope: scope, name: name}
}

// NameCollectionIn records a collection's name and its scope's, as go-dcp's
// events give them (no system events reach its listener).
func (s *State) NameCollectionIn(id uint32, scope, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.collections[id] = collectionName{scopeName: scope, name: name}
}

// NameScope records a scope's name (a creation event).
func (s *State) NameScope(id uint32, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopes[id] = name
}

// ForgetCollection: collection cid was dropped or flushed at seqno in vbucket
// vb; its versions below are gone.
func (s *State) ForgetCollection(vb uint16, cid uint32, seqno uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := strconv.FormatUint(uint64(cid), 10) + ":"
	for k, vs := range s.docs {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		kept := vs[:0]
		for _, v := range vs {
			if v.VB != vb || v.Seqno >= seqno {
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			delete(s.docs, k)
		} else {
			s.docs[k] = kept
		}
	}
	s.changes++
}

func DocKey(collection uint32, key string) string {
	return strconv.FormatUint(uint64(collection), 10) + ":" + key
}

// AddVersion records a mutation (deleted=false) or deletion/expiration.
func (s *State) AddVersion(collection uint32, key string, v Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := DocKey(collection, key)
	s.docs[k] = append(s.docs[k], v)
	s.changes++
}

// Advance moves vbucket vb's position to seqno; reaching the end of the
// snapshot being received, it records seqno as a consistent point.
func (s *State) Advance(vb uint16, seqno uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.vbLocked(vb)
	st.Seqno = seqno
	if seqno >= st.SnapEnd {
		s.markLocked(vb, seqno)
	}
}

func (s *State) markLocked(vb uint16, seqno uint64) {
	points := s.consistent[vb]
	if len(points) == 0 || seqno > points[len(points)-1] {
		s.consistent[vb] = append(points, seqno)
	}
}

// Rollback answers a rollback to `to`: it returns vbucket vb to its last
// consistent point at or below `to` (0 if none), drops every version of vb
// above that point and moves the vbucket's position there, and returns the
// point. A snapshot is consistent only whole: kv_engine de-duplicates within
// one (a key's earlier version is not sent), and its rollback seqno can fall
// inside a snapshot the consumer received whole (failover-table.cc
// needsRollback: a complete snapshot's start is moved to its end, and a
// branch below it is the rollback seqno), so keeping the versions up to `to`
// itself can leave a document without its version at `to` (the key's only
// version received was above it). The same rule as the reference consumer's
// (mockdcp/client/_state.py roll_back).
func (s *State) Rollback(vb uint16, to uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var point uint64
	kept := []uint64{0}
	for _, p := range s.consistent[vb] {
		if p > to {
			break
		}
		if p > 0 {
			kept = append(kept, p)
		}
		point = p
	}
	s.consistent[vb] = kept
	for k, vs := range s.docs {
		left := vs[:0]
		for _, v := range vs {
			if v.VB == vb && v.Seqno > point {
				continue
			}
			left = append(left, v)
		}
		if len(left) == 0 {
			delete(s.docs, k)
		} else {
			s.docs[k] = left
		}
	}
	st := s.vbLocked(vb)
	st.Seqno, st.SnapStart, st.SnapEnd = point, point, point
	s.changes++
	return point
}

func (s *State) vbLocked(vb uint16) *VBState {
	st := s.vbs[vb]
	if st == nil {
		st = &VBState{}
		s.vbs[vb] = st
	}
	return st
}

// UpdateVB runs f on vbucket vb's position under the state lock.
func (s *State) UpdateVB(vb uint16, f func(*VBState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.vbLocked(vb))
}

// VB returns a copy of vbucket vb's position.
func (s *State) VB(vb uint16) (VBState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.vbs[vb]
	if !ok {
		return VBState{}, false
	}
	return *st, true
}

type docOut struct {
	Value string `json:"value"`
	Seqno uint64 `json:"seqno"`
	VB    uint16 `json:"vb"`
}

type stateFile struct {
	Docs     map[string]docOut   `json:"docs"`
	VBuckets map[string]*VBState `json:"vbuckets"`
}

// Save writes the state file atomically (temp file + rename).
func (s *State) Save(path string) error {
	if path == "" {
		return nil
	}
	s.mu.Lock()
	out := stateFile{Docs: map[string]docOut{}, VBuckets: map[string]*VBState{}}
	for k, vs := range s.docs {
		if len(vs) == 0 {
			continue
		}
		last := vs[len(vs)-1]
		if last.Deleted {
			continue
		}
		out.Docs[k] = docOut{Value: last.Value, Seqno: last.Seqno, VB: last.VB}
	}
	vbs := make([]int, 0, len(s.vbs))
	for vb := range s.vbs {
		vbs = append(vbs, int(vb))
	}
	sort.Ints(vbs)
	for _, vb := range vbs {
		c := *s.vbs[uint16(vb)]
		out.VBuckets[strconv.Itoa(vb)] = &c
	}
	s.mu.Unlock()
	data, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// documentRow is one live document as mockdcp's pipeline verify reads it
// (mockdcp/client/_output.py: scope, collection, key, value, seqno, rev, cas,
// vbucket).
type documentRow struct {
	Scope      string `json:"scope"`
	Collection string `json:"collection"`
	Key        string `json:"key"`
	Value      string `json:"value"`
	Seqno      uint64 `json:"seqno"`
	Rev        uint64 `json:"rev"`
	Cas        uint64 `json:"cas"`
	VBucket    uint16 `json:"vbucket"`
}

// documentRows: the live documents, sorted by key; a collection no event
// named is given in hex under the scope "_unknown", as the reference
// consumer does.
func (s *State) documentRows() ([]documentRow, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.docs))
	for k := range s.docs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([]documentRow, 0, len(keys))
	for _, k := range keys {
		vs := s.docs[k]
		if len(vs) == 0 || vs[len(vs)-1].Deleted {
			continue
		}
		last := vs[len(vs)-1]
		cidText, key, _ := strings.Cut(k, ":")
		cid, _ := strconv.ParseUint(cidText, 10, 32)
		row := documentRow{Key: key, Value: last.Value, Seqno: last.Seqno, Rev: last.Rev, Cas: last.Cas, VBucket: last.VB}
		if named, ok := s.collections[uint32(cid)]; ok {
			row.Scope, row.Collection = s.scopes[named.scope], named.name
			if named.scopeName != "" {
				row.Scope = named.scopeName
			} else if row.Scope == "" {
				row.Scope = fmt.Sprintf("0x%x", named.scope)
			}
		} else if cid == 0 {
			row.Scope, row.Collection = "_default", "_default"
		} else {
			row.Scope, row.Collection = "_unknown", fmt.Sprintf("0x%x", cid)
		}
		rows = append(rows, row)
	}
	return rows, s.changes
}

// WriteDocuments replaces path with the live documents as JSON lines
// (written beside it, then renamed: a reader never sees half of it).
func (s *State) WriteDocuments(path string) error {
	rows, _ := s.documentRows()
	var b bytes.Buffer
	for _, row := range rows {
		data, err := json.Marshal(row)
		if err != nil {
			return err
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return replaceFile(path, b.Bytes())
}

// progressReport is how far the documents go, as mockdcp check reads it
// (MOCKDCP_PROGRESS): {"vbuckets": {"VB": {"uuid": U, "seqno": S}}}.
func (s *State) progressReport() []byte {
	type position struct {
		UUID  uint64 `json:"uuid"`
		Seqno uint64 `json:"seqno"`
	}
	s.mu.Lock()
	out := map[string]position{}
	for vb, st := range s.vbs {
		out[strconv.Itoa(int(vb))] = position{UUID: st.UUID, Seqno: st.Seqno}
	}
	s.mu.Unlock()
	data, _ := json.Marshal(map[string]map[string]position{"vbuckets": out})
	return data
}

// replaceFile writes data beside path, then renames it over path (a reader
// never sees half of it).
func replaceFile(path string, data []byte) error {
	dir, name := filepath.Split(path)
	tmp := filepath.Join(dir, "."+name+".writing")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteOutput replaces path with the live documents and, when progress is
// given, then progress with how far they go, taken before them: the report is
// never ahead of the documents.
func (s *State) WriteOutput(path, progress string) error {
	var report []byte
	if progress != "" {
		report = s.progressReport()
	}
	if err := s.WriteDocuments(path); err != nil {
		return err
	}
	if progress == "" {
		return nil
	}
	return replaceFile(progress, report)
}

// KeepDocuments rewrites path every 100 ms while the documents change, and
// progress (if given) after it whenever how far they go changed, until stop is
// closed (the final write is the caller's, when it stops: WriteOutput).
func (s *State) KeepDocuments(path, progress string, stop <-chan struct{}) {
	var written uint64
	var reported []byte
	first := true
	for {
		var report []byte
		if progress != "" {
			report = s.progressReport() // before the documents: never ahead of them
		}
		s.mu.Lock()
		changes := s.changes
		s.mu.Unlock()
		if first || changes != written {
			if err := s.WriteDocuments(path); err != nil {
				fmt.Fprintf(os.Stderr, "write --output: %v\n", err)
			}
			written, first = changes, false
		}
		if progress != "" && !bytes.Equal(report, reported) {
			if err := replaceFile(progress, report); err != nil {
				fmt.Fprintf(os.Stderr, "write --progress: %v\n", err)
			}
			reported = report
		}
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// LoadState reads a state file written by Save: its documents become one
// (non-deleted) version each, its vbucket positions are restored.
func LoadState(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var in stateFile
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	s := NewState()
	for k, d := range in.Docs {
		s.docs[k] = []Version{{Seqno: d.Seqno, VB: d.VB, Value: d.Value}}
	}
	for k, v := range in.VBuckets {
		vb, err := strconv.Atoi(k)
		if err != nil || v == nil {
			return nil, fmt.Errorf("parse %s: bad vbucket %q", path, k)
		}
		c := *v
		s.vbs[uint16(vb)] = &c
		if c.Seqno >= c.SnapEnd { // saved at a snapshot's end (else 0 alone)
			s.markLocked(uint16(vb), c.Seqno)
		}
	}
	return s, nil
}

// ---------------------------------------------------------------- stopping

// StopChannel is closed when stdin reaches EOF (unless noStdin) or on
// SIGTERM / SIGINT. The string sent before closing names the cause.
func StopChannel(noStdin bool) <-chan string {
	ch := make(chan string, 1)
	var once sync.Once
	stop := func(why string) {
		once.Do(func() { ch <- why; close(ch) })
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		stop("signal " + s.String())
	}()
	if !noStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop("stdin EOF")
		}()
	}
	return ch
}

// Logf writes a log line to stderr.
func Logf(prog, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05.000"), prog, fmt.Sprintf(format, args...))
}
