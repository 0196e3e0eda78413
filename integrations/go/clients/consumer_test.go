package mockdcp_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"

	mockdcp "github.com/mockdcp/mockdcp/integrations/go"
)

// gocbConsumer streams every vbucket of the default collection with a gocbcore
// DCPAgent from seqno 0, as a consumer under test would: it keeps each key's
// versions, re-opens a stream that ends with an error from where it was, and on
// ROLLBACK drops what it had above the rollback seqno and re-opens from there.
type gocbConsumer struct {
	t     testing.TB
	agent *gocbcore.DCPAgent

	mu        sync.Mutex
	versions  map[string][]version // key -> versions, oldest first
	pos       map[uint16]*position
	errs      []error
	rollbacks int // ROLLBACK answers taken
	stopping  bool
	wg        sync.WaitGroup
}

type version struct {
	vb      uint16
	seqno   uint64
	value   string
	deleted bool
}

type position struct {
	uuid                      gocbcore.VbUUID
	seqno, snapStart, snapEnd uint64
	known                     bool
}

// agentConfig is what a consumer sets: the bucket and its user, seeded on the
// server's connection string (couchbases:// and the CA with TLS).
func agentConfig(t testing.TB, s *mockdcp.Server, tls bool) *gocbcore.DCPAgentConfig {
	t.Helper()
	cfg := &gocbcore.DCPAgentConfig{UserAgent: "mockdcp-go-test", BucketName: s.Bucket}
	connStr := s.ConnectionString()
	if tls {
		connStr = s.TLSConnectionString()
	}
	if err := cfg.FromConnStr(connStr); err != nil {
		t.Fatalf("FromConnStr(%s): %v", connStr, err)
	}
	cfg.SecurityConfig.Auth = gocbcore.PasswordAuthProvider{Username: s.Username, Password: s.Password}
	if tls {
		pool := s.CertPool()
		cfg.SecurityConfig.TLSRootCAProvider = func() *x509.CertPool { return pool }
	}
	cfg.DefaultRetryStrategy = gocbcore.NewBestEffortRetryStrategy(nil)
	return cfg
}

// streamAll connects with cfg and opens a stream on every vbucket; the agent closes
// when the test ends.
func streamAll(t testing.TB, cfg *gocbcore.DCPAgentConfig) *gocbConsumer {
	t.Helper()
	agent, err := gocbcore.CreateDcpAgent(cfg, "mockdcp-go-test", memd.DcpOpenFlagProducer)
	if err != nil {
		t.Fatalf("CreateDcpAgent: %v", err)
	}
	c := &gocbConsumer{t: t, agent: agent, versions: map[string][]version{}, pos: map[uint16]*position{}}
	t.Cleanup(c.close)
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(time.Now().Add(20*time.Second), gocbcore.WaitUntilReadyOptions{},
		func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		t.Fatalf("WaitUntilReady: %v", err)
	}
	if err := <-ready; err != nil {
		t.Fatalf("gocbcore did not connect to %v: %v", cfg.SeedConfig, err)
	}
	snap, err := agent.ConfigSnapshot()
	if err != nil {
		t.Fatalf("ConfigSnapshot: %v", err)
	}
	n, err := snap.NumVbuckets()
	if err != nil {
		t.Fatalf("NumVbuckets: %v", err)
	}
	for vb := range uint16(n) {
		if err := c.open(vb); err != nil {
			t.Fatalf("open vbucket %d: %v", vb, err)
		}
	}
	return c
}

func (c *gocbConsumer) close() {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.wg.Wait()
	_ = c.agent.Close()
}

// open opens vb's stream from the consumer's position, taking rollbacks.
func (c *gocbConsumer) open(vb uint16) error {
	for attempt := 0; attempt < 20; attempt++ {
		c.mu.Lock()
		p := c.pos[vb]
		if p == nil {
			p = &position{}
			c.pos[vb] = p
		}
		from := *p
		c.mu.Unlock()
		if !from.known {
			log, err := c.failoverLog(vb)
			if err != nil {
				return err
			}
			from.uuid = log[0].VbUUID // newest first
		}
		if from.seqno < from.snapStart || from.seqno > from.snapEnd {
			from.snapStart, from.snapEnd = from.seqno, from.seqno
		}
		done := make(chan error, 1)
		_, err := c.agent.OpenStream(vb, 0, from.uuid, gocbcore.SeqNo(from.seqno), gocbcore.SeqNo(^uint64(0)),
			gocbcore.SeqNo(from.snapStart), gocbcore.SeqNo(from.snapEnd), c, gocbcore.OpenStreamOptions{},
			func(log []gocbcore.FailoverEntry, err error) {
				if err == nil {
					c.mu.Lock()
					p.uuid, p.known = log[0].VbUUID, true
					c.mu.Unlock()
				}
				done <- err
			})
		if err == nil {
			err = <-done
		}
		var rb gocbcore.DCPRollbackError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &rb):
			if err := c.rollback(vb, uint64(rb.SeqNo)); err != nil {
				return err
			}
		default:
			time.Sleep(200 * time.Millisecond)
		}
	}
	return fmt.Errorf("vbucket %d: no stream after 20 attempts", vb)
}

// rollback forgets what vb had above seqno and positions it there, on the branch
// of the failover log that holds seqno.
func (c *gocbConsumer) rollback(vb uint16, seqno uint64) error {
	log, err := c.failoverLog(vb)
	if err != nil {
		return err
	}
	uuid := log[len(log)-1].VbUUID
	for _, e := range log { // newest first
		if uint64(e.SeqNo) <= seqno {
			uuid = e.VbUUID
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rollbacks++
	for key, vs := range c.versions {
		kept := vs[:0]
		for _, v := range vs {
			if v.vb != vb || v.seqno <= seqno {
				kept = append(kept, v)
			}
		}
		c.versions[key] = kept
	}
	*c.pos[vb] = position{uuid: uuid, seqno: seqno, snapStart: seqno, snapEnd: seqno, known: true}
	return nil
}

func (c *gocbConsumer) failoverLog(vb uint16) ([]gocbcore.FailoverEntry, error) {
	type result struct {
		log []gocbcore.FailoverEntry
		err error
	}
	done := make(chan result, 1)
	if _, err := c.agent.GetFailoverLog(vb, func(log []gocbcore.FailoverEntry, err error) {
		done <- result{log, err}
	}); err != nil {
		return nil, err
	}
	r := <-done
	if r.err == nil && len(r.log) == 0 {
		r.err = fmt.Errorf("vbucket %d: an empty failover log", vb)
	}
	return r.log, r.err
}

// docs are the live documents the consumer holds: key -> value.
func (c *gocbConsumer) docs() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for key, vs := range c.versions {
		if n := len(vs); n > 0 && !vs[n-1].deleted {
			out[key] = vs[n-1].value
		}
	}
	return out
}

func (c *gocbConsumer) record(vb uint16, seqno uint64, key []byte, value []byte, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := string(key)
	c.versions[k] = append(c.versions[k], version{vb: vb, seqno: seqno, value: string(value), deleted: deleted})
	c.pos[vb].seqno = seqno
}

// -- gocbcore.StreamObserver

func (c *gocbConsumer) SnapshotMarker(m gocbcore.DcpSnapshotMarker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pos[m.VbID]
	p.snapStart, p.snapEnd = m.StartSeqNo, m.EndSeqNo
}

func (c *gocbConsumer) Mutation(m gocbcore.DcpMutation) {
	c.record(m.VbID, m.SeqNo, m.Key, m.Value, false)
}

func (c *gocbConsumer) Deletion(d gocbcore.DcpDeletion) { c.record(d.VbID, d.SeqNo, d.Key, nil, true) }

func (c *gocbConsumer) Expiration(e gocbcore.DcpExpiration) {
	c.record(e.VbID, e.SeqNo, e.Key, nil, true)
}

// End re-opens a stream the server ended with an error (STATE_CHANGED after a
// failover, a dropped connection), from where the consumer was.
func (c *gocbConsumer) End(end gocbcore.DcpStreamEnd, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil || c.stopping {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.open(end.VbID); err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}
	}()
}

func (c *gocbConsumer) SeqNoAdvanced(a gocbcore.DcpSeqNoAdvanced) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pos[a.VbID].seqno = a.SeqNo
}

func (c *gocbConsumer) CreateCollection(gocbcore.DcpCollectionCreation)     {}
func (c *gocbConsumer) DeleteCollection(gocbcore.DcpCollectionDeletion)     {}
func (c *gocbConsumer) FlushCollection(gocbcore.DcpCollectionFlush)         {}
func (c *gocbConsumer) CreateScope(gocbcore.DcpScopeCreation)               {}
func (c *gocbConsumer) DeleteScope(gocbcore.DcpScopeDeletion)               {}
func (c *gocbConsumer) ModifyCollection(gocbcore.DcpCollectionModification) {}
func (c *gocbConsumer) OSOSnapshot(gocbcore.DcpOSOSnapshot)                 {}

// oracleDocs is the oracle's default collection as key -> value.
func oracleDocs(t testing.TB, s *mockdcp.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range s.Oracle(t) {
		if d.Scope == "_default" && d.Collection == "_default" {
			out[d.Key] = string(d.Body())
		}
	}
	return out
}

// defaultCollection is what a consumer of the default collection must hold.
func defaultCollection(t testing.TB, s *mockdcp.Server) func() map[string]string {
	return func() map[string]string { return oracleDocs(t, s) }
}

// converge waits until got() is want(); errs (if not nil) reports the consumer's
// failures.
func converge(t testing.TB, got, want func() map[string]string, errs func() []error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w, have := want(), got()
		if maps.Equal(have, w) {
			return
		}
		if errs != nil {
			if e := errs(); len(e) > 0 {
				t.Fatalf("the consumer failed: %v", errors.Join(e...))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer does not hold the oracle after 30 s: %s", diff(w, have))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *gocbConsumer) failures() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// diff describes how have differs from want, a few keys of each kind.
func diff(want, have map[string]string) string {
	var missing, extra, wrong []string
	for k, v := range want {
		if hv, ok := have[k]; !ok {
			missing = append(missing, k)
		} else if hv != v {
			wrong = append(wrong, k)
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	few := func(keys []string) string {
		sort.Strings(keys)
		if len(keys) > 5 {
			keys = append(keys[:5], "...")
		}
		return strings.Join(keys, " ")
	}
	return fmt.Sprintf("oracle %d, consumer %d; missing %d [%s], extra %d [%s], other value %d [%s]",
		len(want), len(have), len(missing), few(missing), len(extra), few(extra), len(wrong), few(wrong))
}

// tlsClient is an HTTP client trusting the server's CA (as in the helpers' own tests).
func tlsClient(s *mockdcp.Server) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.CertPool()}}}
}
