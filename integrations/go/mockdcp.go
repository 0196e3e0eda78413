// Package mockdcp starts mockdcp, a mock Couchbase DCP producer, for Go tests, and
// drives it through its control API.
//
//	srv := mockdcp.Start(t, mockdcp.WithVBuckets(64), mockdcp.WithDocs(1000))
//	// point the consumer under test at srv.ConnectionString() (KV) or srv.HTTPURL()
//	srv.Steps(t, mockdcp.Set("user::1", map[string]any{"name": "Ada"}), mockdcp.Failover())
//	want := srv.Oracle(t) // what the consumer must hold
//
// Start runs `mockdcp serve` as a local process when the mockdcp command is on PATH
// (pip install mockdcp), else the mockdcp Docker image with testcontainers-go, and
// stops it when the test ends.
package mockdcp

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Mode says how Start runs the server.
type Mode int

const (
	// Auto runs a local process when the mockdcp command is on PATH, else a container.
	Auto Mode = iota
	// Local runs `mockdcp serve` (the mockdcp command on PATH) as a child process.
	Local
	// Container runs the mockdcp Docker image with testcontainers-go.
	Container
)

func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Local:
		return "local"
	case Container:
		return "container"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// DefaultImage is the image Container mode runs unless WithImage or the
// MOCKDCP_IMAGE environment variable names another (docker build -f
// docker/Dockerfile -t mockdcp . makes it).
const DefaultImage = "mockdcp:latest"

type config struct {
	mode     Mode
	scenario string
	vbuckets int
	docs     int
	docsSet  bool
	tls      bool
	nodes    int
	replicas int
	image    string
	args     []string
	timeout  time.Duration
}

// Option configures Start.
type Option func(*config)

// WithScenario serves a scenario file (YAML): its bucket, seed and steps up to its
// first wait are in before Start returns. A scenario seeds its own data: not with
// WithDocs.
func WithScenario(file string) Option { return func(c *config) { c.scenario = file } }

// WithVBuckets sets the number of vbuckets (1..1024; mockdcp's default is 1024).
func WithVBuckets(n int) Option { return func(c *config) { c.vbuckets = n } }

// WithDocs seeds n Faker documents before Start returns (default 0).
func WithDocs(n int) Option { return func(c *config) { c.docs, c.docsSet = n, true } }

// WithTLS serves KV over TLS and HTTPS too (Server.KVTLSPort, HTTPSPort,
// TLSConnectionString, CAPEM).
func WithTLS() Option { return func(c *config) { c.tls = true } }

// WithNodes asks for a cluster of n data nodes in one mockdcp process (`serve --nodes
// n`; default 1). The Server's ports are node 0's, the seed a client is given; the
// others are in the cluster map every node serves. Local mode only: Container mode
// publishes one node's ports.
func WithNodes(n int) Option { return func(c *config) { c.nodes = n } }

// WithReplicas gives each vbucket n replica copies on other nodes (`serve --replicas
// n`; default 0; at most WithNodes - 1 and 3, which the server checks).
func WithReplicas(n int) Option { return func(c *config) { c.replicas = n } }

// WithImage sets the Docker image of Container mode (default: $MOCKDCP_IMAGE, else
// DefaultImage).
func WithImage(image string) Option { return func(c *config) { c.image = image } }

// WithMode chooses how the server runs (default Auto).
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithArgs adds arguments to `mockdcp serve` (e.g. "--collections",
// "inventory.hotel"), in either mode.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithStartTimeout bounds the start (default 30 s for a process, 2 min for a
// container, which may have to start the image first).
func WithStartTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// serveArgs are the arguments both modes give `mockdcp serve`, ports aside.
func (c *config) serveArgs() []string {
	args := []string{"--json"}
	if c.scenario != "" {
		args = append(args, "--scenario", c.scenario)
	} else {
		args = append(args, "--docs", strconv.Itoa(c.docs))
	}
	if c.vbuckets > 0 {
		args = append(args, "--vbuckets", strconv.Itoa(c.vbuckets))
	}
	if c.nodes != 1 {
		args = append(args, "--nodes", strconv.Itoa(c.nodes))
	}
	if c.replicas != 0 {
		args = append(args, "--replicas", strconv.Itoa(c.replicas))
	}
	return append(args, c.args...)
}

func newConfig(opts []Option) (*config, error) {
	c := &config{nodes: 1}
	for _, o := range opts {
		o(c)
	}
	switch {
	case c.scenario != "" && c.docsSet:
		return nil, errors.New("a scenario seeds its own data: WithScenario and WithDocs together")
	case c.docs < 0:
		return nil, fmt.Errorf("WithDocs(%d): not a count", c.docs)
	case c.vbuckets < 0 || c.vbuckets > 1024:
		return nil, fmt.Errorf("WithVBuckets(%d): 1..1024", c.vbuckets)
	case c.nodes < 1:
		return nil, fmt.Errorf("WithNodes(%d): at least 1", c.nodes)
	case c.replicas < 0:
		return nil, fmt.Errorf("WithReplicas(%d): at least 0", c.replicas)
	case c.nodes > 1 && c.mode == Container:
		return nil, fmt.Errorf("WithNodes(%d): Container mode publishes one node's ports; use Local", c.nodes)
	}
	if c.image == "" {
		c.image = os.Getenv("MOCKDCP_IMAGE")
	}
	if c.image == "" {
		c.image = DefaultImage
	}
	if c.mode == Auto {
		if _, err := exec.LookPath("mockdcp"); err == nil {
			c.mode = Local
		} else {
			c.mode = Container
		}
	}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
		if c.mode == Container {
			c.timeout = 2 * time.Minute
		}
	}
	return c, nil
}

// Server is a running mockdcp: one data node with one bucket.
type Server struct {
	// Mode is how it runs (Local or Container).
	Mode Mode
	// Host is the address clients reach it at ("127.0.0.1" for a process; the
	// Docker host, usually "localhost", for a container).
	Host string
	// KVPort and HTTPPort are the memcached (KV) and management ports as clients
	// reach them (a container's published ports).
	KVPort, HTTPPort int
	// KVTLSPort and HTTPSPort are the TLS ports (0 without WithTLS).
	KVTLSPort, HTTPSPort int
	// Bucket, Username and Password are the bucket and its user.
	Bucket, Username, Password string

	control *Client
	caPEM   []byte
}

// ConnectionString is couchbase://host:kvport, for SDKs and gocbcore's FromConnStr.
func (s *Server) ConnectionString() string {
	return "couchbase://" + net.JoinHostPort(s.Host, strconv.Itoa(s.KVPort))
}

// TLSConnectionString is couchbases://host:kvtlsport ("" without WithTLS); trust
// CAPEM.
func (s *Server) TLSConnectionString() string {
	if s.KVTLSPort == 0 {
		return ""
	}
	return "couchbases://" + net.JoinHostPort(s.Host, strconv.Itoa(s.KVTLSPort))
}

// KVAddress is host:kvport (gocbcore SeedConfig.MemdAddrs).
func (s *Server) KVAddress() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.KVPort)) }

// HTTPURL is http://host:httpport: the management port, where clients bootstrapping
// over HTTP (go-dcp's hosts) and the control API are.
func (s *Server) HTTPURL() string {
	return "http://" + net.JoinHostPort(s.Host, strconv.Itoa(s.HTTPPort))
}

// HTTPSURL is https://host:httpsport ("" without WithTLS).
func (s *Server) HTTPSURL() string {
	if s.HTTPSPort == 0 {
		return ""
	}
	return "https://" + net.JoinHostPort(s.Host, strconv.Itoa(s.HTTPSPort))
}

// CAPEM is the CA certificate (PEM) that signs the TLS ports' certificates (nil
// without WithTLS).
func (s *Server) CAPEM() []byte { return s.caPEM }

// CertPool is a pool holding CAPEM (nil without WithTLS): gocbcore's
// TLSRootCAProvider, a tls.Config's RootCAs.
func (s *Server) CertPool() *x509.CertPool {
	if s.caPEM == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.caPEM)
	return pool
}

// Control is the control API client of this server.
func (s *Server) Control() *Client { return s.control }

// Steps applies steps, failing the test if the server refuses them or one fails
// (a wait that times out), and marking it failed (t.Errorf) if an expectation so
// far is not met. Control().Steps returns all of that to the caller instead.
func (s *Server) Steps(t testing.TB, steps ...Step) *StepsResult {
	t.Helper()
	r, err := s.control.Steps(context.Background(), steps...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, e := range r.Progress.Expectations {
		if !e.Passed {
			t.Errorf("mockdcp: expectation %q not met: %s", e.Name, e.Detail)
		}
	}
	return r
}

// Oracle returns the live documents a correct consumer holds now (failing the test
// on error).
func (s *Server) Oracle(t testing.TB) []Document {
	t.Helper()
	docs, err := s.control.Oracle(context.Background())
	if err != nil {
		t.Fatalf("%v", err)
	}
	return docs
}

// State returns GET /mock/state (failing the test on error).
func (s *Server) State(t testing.TB) *State {
	t.Helper()
	st, err := s.control.State(context.Background())
	if err != nil {
		t.Fatalf("%v", err)
	}
	return st
}

// Start starts a mockdcp server for the test and stops it when the test (or
// subtest, or benchmark) ends. It returns once the server accepts connections with
// its documents or scenario loaded, and fails the test when it cannot start,
// with the server's own message.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := start(t, opts)
	if err != nil {
		t.Fatalf("mockdcp: %v", err)
	}
	return s
}

// start is Start returning its error; cleanups go to t.Cleanup.
func start(t testing.TB, opts []Option) (*Server, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var s *Server
	switch c.mode {
	case Local:
		s, err = startLocal(ctx, t, c)
	case Container:
		s, err = startContainer(ctx, t, c)
	default:
		err = fmt.Errorf("unknown mode %v", c.mode)
	}
	if err != nil {
		return nil, err
	}
	s.Mode = c.mode
	s.control = NewClient(s.HTTPURL(), s.Username, s.Password, nil)
	if c.tls {
		if s.caPEM, err = s.control.CAPEM(ctx); err != nil {
			return nil, fmt.Errorf("the CA: %w", err)
		}
	}
	return s, nil
}
