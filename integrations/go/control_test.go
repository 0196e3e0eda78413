package mockdcp_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	mockdcp "github.com/mockdcp/mockdcp/integrations/go"
)

// tlsClient is an HTTP client trusting the server's CA.
func tlsClient(s *mockdcp.Server) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.CertPool()}}}
}

func TestStepJSON(t *testing.T) {
	cases := []struct {
		step mockdcp.Step
		want string
	}{
		{mockdcp.Set("k", map[string]any{"a": 1}), `{"set":{"key":"k","value":{"a":1}}}`},
		{mockdcp.Set("k", []byte("text")), `{"set":{"key":"k","value":"text"}}`},
		{mockdcp.Set("k", json.RawMessage(`{"b": [1, 2]}`)).With("collection", "s.c"),
			`{"set":{"collection":"s.c","key":"k","value":{"b":[1,2]}}}`},
		{mockdcp.Persist(), `{"persist":{}}`},
		{mockdcp.Failover(3), `{"failover":{"vbuckets":3}}`},
		{mockdcp.Failover(0, 5), `{"failover":{"vbuckets":[0,5]}}`},
		{mockdcp.EndStream("too_slow", 2), `{"end_stream":{"reason":"too_slow","vbuckets":2}}`},
		{mockdcp.Wait(1500 * time.Millisecond), `{"wait":{"seconds":1.5}}`},
		{mockdcp.WaitFor(mockdcp.ConsumerProgress{Seqno: mockdcp.High, Acked: true}, 5*time.Second),
			`{"wait":{"consumer":{"acked":true,"seqno":"high"},"timeout":5}}`},
		{mockdcp.ExpectRollback(4), `{"expect":{"rollback":{"vbucket":4}}}`},
		{mockdcp.NewStep("flush", nil), `{"flush":{}}`},
	}
	for _, c := range cases {
		got, err := json.Marshal(c.step)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.step.Name, got, err, c.want)
		}
		var back mockdcp.Step
		if err := json.Unmarshal(got, &back); err != nil || back.Name != c.step.Name {
			t.Errorf("%s: decoded %+v (%v)", got, back, err)
		}
	}
	if err := json.Unmarshal([]byte(`{"a":{},"b":{}}`), new(mockdcp.Step)); err == nil {
		t.Error("a step with two members decoded")
	}
}

func TestControlAPI(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithVBuckets(4))
	ctrl := s.Control()
	ctx := context.Background()

	r, err := ctrl.Steps(ctx,
		mockdcp.Persistence(true),
		mockdcp.Set("user::1", map[string]any{"name": "Ada"}),
		mockdcp.Set("user::2", "plain"),
		mockdcp.Delete("user::2"),
		mockdcp.Generate(3),
		mockdcp.Checkpoint(),
		mockdcp.Label("written"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if r.Applied != 7 || r.Progress.Label == nil || *r.Progress.Label != "written" {
		t.Errorf("steps: %+v", r)
	}
	st, err := ctrl.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var high uint64
	for _, vb := range st.VBuckets {
		high += vb.HighSeqno
	}
	if !st.PersistencePaused || high != 6 || st.Totals["connections_opened"] != 0 {
		t.Errorf("state: paused %v, high seqnos %d, totals %v", st.PersistencePaused, high, st.Totals)
	}
	docs, err := ctrl.Oracle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 4 || docs[3].Key != "user::1" || string(docs[3].Body()) != `{"name":"Ada"}` {
		t.Errorf("oracle: %+v", docs)
	}

	// a bad list is refused whole (422), naming the step and field, and changes nothing
	_, err = ctrl.Steps(ctx, mockdcp.Set("user::3", "x"), mockdcp.Delete("no-such-key"))
	if !mockdcp.IsProblem(err, 422) {
		t.Fatalf("a bad step list: %v, want a 422 problem", err)
	}
	t.Logf("refused: %v", err)
	if docs, _ := ctrl.Oracle(ctx); len(docs) != 4 {
		t.Errorf("a refused list changed the bucket: %d documents", len(docs))
	}

	// an expectation nobody meets is reported, not refused (200); a wait that times
	// out fails the list (409)
	r, err = ctrl.Steps(ctx, mockdcp.ExpectReconnected().With("within", 0.2))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Progress.Expectations); n != 1 || r.Progress.Expectations[0].Passed {
		t.Errorf("progress expectations: %+v", r.Progress.Expectations)
	}
	e, err := ctrl.Expectations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.Passed || len(e.Expectations) != 1 || e.Expectations[0].Passed {
		t.Errorf("expectations: %+v", e)
	}
	_, err = ctrl.Steps(ctx, mockdcp.WaitFor(mockdcp.ConsumerProgress{Connections: 1}, 300*time.Millisecond))
	if !mockdcp.IsProblem(err, 409) {
		t.Fatalf("a wait that timed out: %v, want a 409 problem", err)
	}
}

func TestRunScenario(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithVBuckets(4))
	ctx := context.Background()
	run, err := s.Control().RunScenario(ctx, []byte("name: bg\nsteps:\n  - generate: {docs: 5}\n  - persist: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if run.Scenario != "bg" || run.Steps != 2 {
		t.Errorf("scenario: %+v", run)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.State(t)
		if st.Scenario != nil && st.Scenario.Finished {
			if st.Scenario.Failure != nil {
				t.Fatalf("scenario failed: %s", *st.Scenario.Failure)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scenario not finished: %+v", st.Scenario)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if docs := s.Oracle(t); len(docs) != 5 {
		t.Errorf("oracle: %d documents, want 5", len(docs))
	}
}
