package mockdcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mockdcp "github.com/mockdcp/mockdcp/integrations/go"
)

func TestStartLocal(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithVBuckets(8), mockdcp.WithDocs(20))
	if s.Mode != mockdcp.Local || s.Host != "127.0.0.1" || s.KVPort == 0 || s.HTTPPort == 0 {
		t.Fatalf("server %+v", s)
	}
	if want := fmt.Sprintf("couchbase://127.0.0.1:%d", s.KVPort); s.ConnectionString() != want {
		t.Errorf("ConnectionString() = %q, want %q", s.ConnectionString(), want)
	}
	if s.TLSConnectionString() != "" || s.CAPEM() != nil || s.KVTLSPort != 0 {
		t.Errorf("TLS without WithTLS: %q", s.TLSConnectionString())
	}
	if s.Bucket != "default" || s.Username != "Administrator" || s.Password != "password" {
		t.Errorf("bucket %q user %q password %q", s.Bucket, s.Username, s.Password)
	}
	ctx := context.Background()
	if err := s.Control().Health(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.State(t)
	if st.NumVBuckets != 8 || len(st.VBuckets) != 8 || st.KVPort != s.KVPort || st.Bucket != "default" {
		t.Errorf("state: %d vbuckets, kv port %d, bucket %q", st.NumVBuckets, st.KVPort, st.Bucket)
	}
	if docs := s.Oracle(t); len(docs) != 20 {
		t.Errorf("oracle: %d documents, want 20", len(docs))
	}
}

// Auto runs the mockdcp command when it is on PATH.
func TestAutoRunsTheCommand(t *testing.T) {
	if s := mockdcp.Start(t, mockdcp.WithVBuckets(4)); s.Mode != mockdcp.Local {
		t.Fatalf("mode %v, want local (mockdcp is on PATH)", s.Mode)
	}
}

func TestStartWithTLS(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithTLS(), mockdcp.WithVBuckets(4))
	if s.KVTLSPort == 0 || s.HTTPSPort == 0 {
		t.Fatalf("TLS ports %d, %d", s.KVTLSPort, s.HTTPSPort)
	}
	if !strings.HasPrefix(s.TLSConnectionString(), "couchbases://127.0.0.1:") {
		t.Errorf("TLSConnectionString() = %q", s.TLSConnectionString())
	}
	if !strings.Contains(string(s.CAPEM()), "BEGIN CERTIFICATE") || s.CertPool() == nil {
		t.Fatalf("CAPEM() = %q", s.CAPEM())
	}
	// the control API on HTTPS, trusting the CA
	httpsClient := mockdcp.NewClient(s.HTTPSURL(), s.Username, s.Password, tlsClient(s))
	if err := httpsClient.Health(context.Background()); err != nil {
		t.Fatalf("health over HTTPS: %v", err)
	}
}

func TestStartWithScenario(t *testing.T) {
	file := filepath.Join(t.TempDir(), "two.yaml")
	scenario := "name: two\nbucket: {name: orders, vbuckets: 4}\nsteps:\n" +
		"  - set: {key: a, value: {n: 1}}\n  - set: {key: b, value: {n: 2}}\n"
	if err := os.WriteFile(file, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithScenario(file))
	if s.Bucket != "orders" {
		t.Errorf("bucket %q, want the scenario's", s.Bucket)
	}
	if got := oracleDocs(t, s); len(got) != 2 || got["a"] != `{"n":1}` {
		t.Errorf("oracle %v, want the scenario's two documents", got)
	}
}

// The server stops when the test that started it ends.
func TestCleanupStopsTheServer(t *testing.T) {
	var s *mockdcp.Server
	t.Run("uses", func(t *testing.T) {
		s = mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithVBuckets(4))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Control().Health(ctx); err == nil {
		t.Fatalf("%s still answers after its test ended", s.HTTPURL())
	}
}

// fakeT records what Start does with a testing.TB: it fails in a goroutine of its
// own (Fatalf ends it, as testing.T's does).
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	fatal    string
	cleanups []func()
}

func (f *fakeT) Helper() {}
func (f *fakeT) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal != ""
}
func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// startFailing runs Start on a fakeT and returns its failure ("" if it started).
func startFailing(t *testing.T, opts ...mockdcp.Option) string {
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mockdcp.Start(f, opts...)
	}()
	<-done
	for _, fn := range slices.Backward(f.cleanups) {
		fn()
	}
	return f.fatal
}

// A server that exits before it is ready fails the test with its own message.
func TestStartFailsWithTheServersMessage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	msg := startFailing(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithScenario(missing))
	if !strings.Contains(msg, "exited before it was ready") || !strings.Contains(msg, "missing.yaml") {
		t.Fatalf("failure %q does not carry the server's message", msg)
	}
	t.Logf("Start failed with: %s", msg)
}

// WithNodes(3) and WithReplicas(1) run a cluster: the seed's HTTP port serves a map
// with three nodes and one replica per vbucket; a replica count the nodes cannot hold
// fails Start with the server's message.
func TestWithNodesAndReplicas(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithNodes(3),
		mockdcp.WithReplicas(1), mockdcp.WithVBuckets(8))
	req, _ := http.NewRequest("GET", s.HTTPURL()+"/pools/default/b/"+s.Bucket, nil)
	req.SetBasicAuth(s.Username, s.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cfg struct {
		NodesExt []struct {
			Ports map[string]int `json:"services"`
		} `json:"nodesExt"`
		Map struct {
			NumReplicas int     `json:"numReplicas"`
			VBucketMap  [][]int `json:"vBucketMap"`
		} `json:"vBucketServerMap"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		t.Fatalf("the cluster map (%s): %v", resp.Status, err)
	}
	if len(cfg.NodesExt) != 3 || cfg.Map.NumReplicas != 1 || len(cfg.Map.VBucketMap) != 8 {
		t.Fatalf("map: %d nodes, %d replicas, %d vbuckets", len(cfg.NodesExt),
			cfg.Map.NumReplicas, len(cfg.Map.VBucketMap))
	}
	if cfg.NodesExt[0].Ports["kv"] != s.KVPort {
		t.Errorf("node 0's kv port %d, the seed's %d", cfg.NodesExt[0].Ports["kv"], s.KVPort)
	}
	for vb, chain := range cfg.Map.VBucketMap {
		if len(chain) != 2 || chain[0] == chain[1] || chain[1] < 0 {
			t.Errorf("vbucket %d: chain %v", vb, chain)
		}
	}
	msg := startFailing(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithNodes(2),
		mockdcp.WithReplicas(2))
	if !strings.Contains(msg, "replica") {
		t.Fatalf("failure %q does not name the replicas", msg)
	}
}

func TestOptionsRefusedBeforeStarting(t *testing.T) {
	for name, opts := range map[string][]mockdcp.Option{
		"scenario and docs": {mockdcp.WithScenario("x.yaml"), mockdcp.WithDocs(3)},
		"vbuckets":          {mockdcp.WithVBuckets(2000)},
		"nodes":             {mockdcp.WithNodes(0)},
		"replicas":          {mockdcp.WithReplicas(-1)},
	} {
		if msg := startFailing(t, append(opts, mockdcp.WithMode(mockdcp.Local))...); msg == "" {
			t.Errorf("%s: Start did not fail", name)
		}
	}
	// checked before any container starts: Container mode publishes one node's ports
	msg := startFailing(t, mockdcp.WithNodes(3), mockdcp.WithMode(mockdcp.Container))
	if !strings.Contains(msg, "Container mode publishes one node") {
		t.Errorf("WithNodes(3) in Container mode: %q", msg)
	}
}

// Start is ready (a local process, no documents): the median of 5 starts, logged. It
// is about a fifth of a second; a median over 5 s is a broken start, not a slow one
// (the start's speed is measured by `mockdcp bench startup`, not by a timed test that
// fails when the machine is busy).
func TestStartIsReady(t *testing.T) {
	var took []time.Duration
	for range 5 {
		t.Run("start", func(t *testing.T) {
			begin := time.Now()
			mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local))
			took = append(took, time.Since(begin))
		})
	}
	slices.Sort(took)
	median := took[len(took)/2]
	t.Logf("Start (local, 1024 vbuckets, 0 documents) to ready: median %v of %v", median, took)
	if median >= 5*time.Second {
		t.Errorf("median start %v: not under 5 s", median)
	}
}
