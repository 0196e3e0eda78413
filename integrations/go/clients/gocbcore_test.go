package mockdcp_test

import (
	"context"
	"testing"
	"time"

	mockdcp "github.com/mockdcp/mockdcp/integrations/go"
)

// gocbcore's DCP agent, seeded on ConnectionString, streams the seeded documents
// and then live writes made with typed steps, and ends up with the oracle.
func TestGocbcoreStreamsTheOracle(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithVBuckets(16), mockdcp.WithDocs(300))
	c := streamAll(t, agentConfig(t, s, false))
	converge(t, c.docs, defaultCollection(t, s), c.failures)

	s.Steps(t,
		mockdcp.Set("user::ada", map[string]any{"name": "Ada", "born": 1815}),
		mockdcp.Set("raw::1", "not JSON"),
		mockdcp.Delete("user::000007"),
		mockdcp.Generate(50).With("prefix", "more"),
	)
	converge(t, c.docs, defaultCollection(t, s), c.failures)
	if got := c.docs()["user::ada"]; got != `{"born":1815,"name":"Ada"}` {
		t.Errorf("user::ada = %q, want the compact JSON of the step's value", got)
	}
}

// A failover that loses writes the consumer has read: the consumer must roll back.
// The steps are built with the typed constructors; the server checks the rollback
// (ExpectRollback) and the consumer ends up with the oracle, without the lost write.
func TestGocbcoreRollsBackAfterFailover(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithVBuckets(4))
	s.Steps(t, mockdcp.Generate(40), mockdcp.Persist())
	c := streamAll(t, agentConfig(t, s, false))
	converge(t, c.docs, defaultCollection(t, s), c.failures)

	// held by the paused flusher: on no disk when the vbucket fails over
	s.Steps(t, mockdcp.Persistence(true), mockdcp.Set("lost::1", map[string]any{"v": 1}))
	var vb int = -1
	for _, d := range s.Oracle(t) {
		if d.Key == "lost::1" {
			vb = int(d.VBucket)
		}
	}
	if vb < 0 {
		t.Fatal("lost::1 is not in the oracle")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := s.Control().Steps(ctx,
		mockdcp.Label("before-failover"),
		mockdcp.WaitFor(mockdcp.ConsumerProgress{VBuckets: []int{vb}, Seqno: mockdcp.High}, 20*time.Second),
		mockdcp.Failover(vb),
		mockdcp.ExpectRollback(vb).With("within", 20),
		mockdcp.Persistence(false),
	)
	if err != nil {
		t.Fatalf("steps: %v", err)
	}
	if r.Applied != 5 {
		t.Errorf("applied %d steps, want 5", r.Applied)
	}
	converge(t, c.docs, defaultCollection(t, s), c.failures)
	c.mu.Lock()
	rollbacks := c.rollbacks
	c.mu.Unlock()
	if rollbacks == 0 {
		t.Error("the consumer was never told to roll back")
	}
	if _, ok := c.docs()["lost::1"]; ok {
		t.Error("the consumer kept lost::1, which the failover lost")
	}
	e, err := s.Control().Expectations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Passed || len(e.Expectations) != 1 {
		t.Errorf("expectations: %+v", e)
	}
}

// With WithTLS, gocbcore seeded on TLSConnectionString and trusting CAPEM streams
// over the TLS port.
func TestGocbcoreOverTLS(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithTLS(),
		mockdcp.WithVBuckets(8), mockdcp.WithDocs(100))
	if s.KVTLSPort == 0 || s.HTTPSPort == 0 || len(s.CAPEM()) == 0 {
		t.Fatalf("TLS ports %d/%d, CA %d bytes", s.KVTLSPort, s.HTTPSPort, len(s.CAPEM()))
	}
	cfg := agentConfig(t, s, true)
	if !cfg.SecurityConfig.UseTLS {
		t.Fatalf("%s: gocbcore does not use TLS", s.TLSConnectionString())
	}
	c := streamAll(t, cfg)
	converge(t, c.docs, defaultCollection(t, s), c.failures)
}
