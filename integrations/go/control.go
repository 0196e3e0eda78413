package mockdcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client speaks mockdcp's control API (GET /mock/openapi.json describes it) on a
// server's management port. Server.Control returns one; NewClient makes one for a
// server started some other way.
type Client struct {
	base     string
	user     string
	password string
	http     *http.Client
}

// NewClient returns a client of the control API at baseURL (http://host:port or
// https://...). user and password are sent as Basic credentials: a server bound to
// loopback ignores them, one bound elsewhere (a container) requires the bucket
// user's. httpClient nil: http.DefaultClient.
func NewClient(baseURL, user, password string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), user: user, password: password, http: httpClient}
}

// BaseURL is the management URL the client talks to.
func (c *Client) BaseURL() string { return c.base }

// Problem is an error answer of the control API (an RFC 9457 problem document): a
// bad step list is Status 422 with one entry in Errors per bad field, a step that
// failed (a wait that timed out, an expectation not met) 409.
type Problem struct {
	Type   string           `json:"type"`
	Title  string           `json:"title"`
	Status int              `json:"status"`
	Detail string           `json:"detail"`
	Errors []map[string]any `json:"errors,omitempty"`
	// Route is the request that got it, e.g. "POST /mock/steps".
	Route string `json:"-"`
}

func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mockdcp: %s: %d %s", p.Route, p.Status, p.Title)
	if p.Detail != "" {
		b.WriteString(": " + strings.TrimPrefix(p.Detail, p.Route+": "))
	}
	for _, e := range p.Errors {
		if j, err := json.Marshal(e); err == nil {
			b.WriteString("\n  " + string(j))
		}
	}
	return b.String()
}

// Health is GET /mock/health's answer.
type Health struct {
	Status string `json:"status"`
}

// State is GET /mock/state: connections, streams, per-vbucket seqnos and the
// progress of the scenario or step list running.
type State struct {
	Bucket            string           `json:"bucket"`
	NumVBuckets       int              `json:"num_vbuckets"`
	KVPort            int              `json:"kv_port"`
	HTTPPort          int              `json:"http_port"`
	Connections       []Connection     `json:"connections"`
	Streams           StreamCounts     `json:"streams"`
	VBuckets          []VBucketState   `json:"vbuckets"`
	Totals            map[string]int64 `json:"totals"`
	PersistencePaused bool             `json:"persistence_paused"`
	// Scenario is nil when no scenario or step list ran.
	Scenario *Progress `json:"scenario"`
}

// Connection is one KV connection's counters.
type Connection struct {
	ConnID        int           `json:"conn_id"`
	Name          string        `json:"name"` // the DCP_OPEN name ("" before it)
	State         string        `json:"state"`
	BytesReceived int64         `json:"bytes_received"`
	BytesSent     int64         `json:"bytes_sent"`
	MessagesSent  int64         `json:"messages_sent"`
	AckedBytes    int64         `json:"acked_bytes"`
	UnackedBytes  int64         `json:"unacked_bytes"`
	BufferSize    int64         `json:"buffer_size"`
	Acks          int64         `json:"acks"`
	NoopsSent     int64         `json:"noops_sent"`
	NoopsAnswered int64         `json:"noops_answered"`
	Streams       []StreamStats `json:"streams"`
}

// StreamStats is one stream's counters.
type StreamStats struct {
	VBucket       int    `json:"vbucket"`
	StreamID      *int   `json:"stream_id"`
	State         string `json:"state"`
	ItemsSent     int64  `json:"items_sent"`
	MarkersSent   int64  `json:"markers_sent"`
	Backfills     int64  `json:"backfills"`
	LastSentSeqno uint64 `json:"last_sent_seqno"`
	LastReadSeqno uint64 `json:"last_read_seqno"`
	WrittenSeqno  uint64 `json:"written_seqno"`
}

// StreamCounts counts the streams, in all and per state.
type StreamCounts struct {
	Total   int            `json:"total"`
	ByState map[string]int `json:"by_state"`
}

// VBucketState is one vbucket's seqnos. SentSeqno and AckedSeqno are nil when no
// stream has sent (or no ack covered) anything.
type VBucketState struct {
	VBucket        int     `json:"vbucket"`
	State          string  `json:"state"`
	UUID           uint64  `json:"uuid"`
	HighSeqno      uint64  `json:"high_seqno"`
	PersistedSeqno uint64  `json:"persisted_seqno"`
	PurgeSeqno     uint64  `json:"purge_seqno"`
	Streams        int     `json:"streams"`
	SentSeqno      *uint64 `json:"sent_seqno"`
	AckedSeqno     *uint64 `json:"acked_seqno"`
}

// Progress is the step runner's progress.
type Progress struct {
	Applied      int           `json:"applied"`
	Current      *string       `json:"current"`
	Label        *string       `json:"label"`
	Expectations []Expectation `json:"expectations"`
	Failure      *string       `json:"failure"`
	Finished     bool          `json:"finished"`
}

// Expectation is the outcome of one expect step.
type Expectation struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
	Step   int    `json:"step"`
}

// Expectations is GET /mock/expectations.
type Expectations struct {
	Expectations []Expectation `json:"expectations"`
	Passed       bool          `json:"passed"` // every one passed
}

// Document is one row of the oracle: a live document as a correct consumer holds it.
type Document struct {
	Scope       string `json:"scope"`
	Collection  string `json:"collection"`
	Key         string `json:"key"`
	Value       string `json:"value,omitempty"`        // the value, when it is UTF-8 text
	ValueBase64 string `json:"value_base64,omitempty"` // the value, when it is not
	Datatype    uint8  `json:"datatype"`
	Flags       uint32 `json:"flags"`
	Expiry      uint32 `json:"expiry"`
	Rev         uint64 `json:"rev"`
	Seqno       uint64 `json:"seqno"`
	VBucket     uint16 `json:"vbucket"`
	CAS         int64  `json:"cas"` // as a signed 64-bit integer
}

// Body is the document's value as bytes.
func (d Document) Body() []byte {
	if d.ValueBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(d.ValueBase64)
		if err == nil {
			return b
		}
	}
	return []byte(d.Value)
}

type oracleRows struct {
	Rows []Document `json:"rows"`
}

// StepsResult is POST /mock/steps' answer.
type StepsResult struct {
	Applied  int      `json:"applied"`
	Progress Progress `json:"progress"`
}

// ScenarioRun is POST /mock/scenario's answer: the scenario runs in the background.
type ScenarioRun struct {
	Scenario string `json:"scenario"`
	Steps    int    `json:"steps"`
	State    string `json:"state"` // where to follow it (/mock/state)
}

// Health answers nil when the server is up.
func (c *Client) Health(ctx context.Context) error {
	var h Health
	if err := c.call(ctx, "health", nil, &h); err != nil {
		return err
	}
	if h.Status != "ok" {
		return fmt.Errorf("mockdcp: health: status %q", h.Status)
	}
	return nil
}

// State returns GET /mock/state.
func (c *Client) State(ctx context.Context) (*State, error) {
	var s State
	if err := c.call(ctx, "state", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Oracle returns what a correct consumer holds now: one row per live document,
// sorted by scope, collection and key.
func (c *Client) Oracle(ctx context.Context) ([]Document, error) {
	var o oracleRows
	if err := c.call(ctx, "oracle", nil, &o); err != nil {
		return nil, err
	}
	return o.Rows, nil
}

// Expectations returns the outcomes of the expect steps applied so far.
func (c *Client) Expectations(ctx context.Context) (*Expectations, error) {
	var e Expectations
	if err := c.call(ctx, "expectations", nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Steps applies the steps in order and returns once they have run: a wait or
// expect step holds the answer until it is met (ctx bounds it). The server checks
// the whole list first; a bad list (a *Problem with Status 422) changes nothing.
func (c *Client) Steps(ctx context.Context, steps ...Step) (*StepsResult, error) {
	if steps == nil {
		steps = []Step{}
	}
	body, err := json.Marshal(steps)
	if err != nil {
		return nil, err
	}
	var r StepsResult
	if err := c.call(ctx, "steps", body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RunScenario runs a scenario (a scenario file's YAML or JSON) against the server's
// bucket in the background; State().Scenario follows it.
func (c *Client) RunScenario(ctx context.Context, scenario []byte) (*ScenarioRun, error) {
	var r ScenarioRun
	if err := c.call(ctx, "scenario", scenario, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// CAPEM returns the CA certificate (PEM) that signs the TLS ports' certificates.
func (c *Client) CAPEM(ctx context.Context) ([]byte, error) {
	var pem []byte
	if err := c.call(ctx, "ca", nil, &pem); err != nil {
		return nil, err
	}
	return pem, nil
}

// openAPI returns the server's OpenAPI document.
func (c *Client) openAPI(ctx context.Context) (map[string]any, error) {
	var doc map[string]any
	if err := c.call(ctx, "openapi", nil, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// call sends the named route's request and decodes a JSON answer into out (a
// *[]byte takes the body as it is).
func (c *Client) call(ctx context.Context, name string, body []byte, out any) error {
	r := routeNamed(name)
	label := r.Method + " " + r.Path
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, c.base+r.Path, reader)
	if err != nil {
		return fmt.Errorf("mockdcp: %s: %w", label, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", r.Request)
	}
	req.Header.Set("Accept", r.Response+", application/problem+json")
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("mockdcp: %s: %w", label, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("mockdcp: %s: %w", label, err)
	}
	if resp.StatusCode != r.Status {
		p := &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Route: label}
		if json.Unmarshal(data, p) != nil || p.Status == 0 {
			p.Status, p.Detail = resp.StatusCode, strings.TrimSpace(string(data))
		}
		p.Route = label
		return p
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("mockdcp: %s: decode the answer: %w", label, err)
	}
	return nil
}

// IsProblem reports whether err is a control API error answer with this status.
func IsProblem(err error, status int) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == status
}
