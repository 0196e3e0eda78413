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
	_ = fs.Parse(os.Args[1:])
	o.CollectionFilter = colls
	o.Streams = streams
	if fs.NArg() > 0 {
		Usage(prog, "unexpected arguments: %v", fs.Args())
	}
	if o.Out == "" {
		Usage(prog, "--out is required")
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 20 * time.Second
	}
	if (o.ClientCert != "") != (o.ClientKey != "") || (o.ClientCert != "" && o.TLSCA == "") {
		Usage(prog, "--client-cert and --client-key go together, with --tls-ca")
	}
	return o
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

func OpenEvents(path string) (*Events, error) {
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
}

func NewState() *State {
	return &State{docs: map[string][]Version{}, vbs: map[uint16]*VBState{}}
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
}

// Rollback drops every version of vbucket vb with seqno > to and moves the
// vbucket's position back to `to`.
func (s *State) Rollback(vb uint16, to uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, vs := range s.docs {
		kept := vs[:0]
		for _, v := range vs {
			if v.VB == vb && v.Seqno > to {
				continue
			}
			kept = append(kept, v)
		}
		if len(kept) == 0 {
			delete(s.docs, k)
		} else {
			s.docs[k] = kept
		}
	}
	st := s.vbLocked(vb)
	if st.Seqno > to {
		st.Seqno = to
	}
	st.SnapStart, st.SnapEnd = to, to
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
