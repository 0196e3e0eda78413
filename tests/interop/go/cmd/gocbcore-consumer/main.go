// gocbcore-consumer streams a bucket with gocbcore's DCPAgent and records
// every event it sees as JSON lines (see tests/interop/go/README.md).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"

	"mockdcp/interop/internal/harness"
)

const prog = "gocbcore-consumer"

const (
	maxOpenAttempts = 6
	maxRollbacks    = 20
	openTimeout     = 30 * time.Second
	endSeqNo        = gocbcore.SeqNo(0xffffffffffffffff)
)

// stream is one stream per vbucket: its stream id (0 = none), its filter
// (nil = none) and what it received.
type stream struct {
	sid    uint16
	filter *gocbcore.OpenStreamFilterOptions
	st     *harness.State
}

type consumer struct {
	opts  *harness.Options
	ev    *harness.Events
	agent *gocbcore.DCPAgent
	// streams: one (sid 0) without --stream, else one per --stream (sid 1..)
	streams []*stream
	bySID   map[uint16]*stream
	useSID  bool
	stopCh  chan struct{}

	stopping atomic.Bool

	// --tls-ca and --client-cert, read once (nil without TLS)
	roots      *x509.CertPool
	clientCert *tls.Certificate

	mu        sync.Mutex
	reopening map[[2]uint16]bool
	// a stream ended while its re-open was in flight: re-open once more
	reopenAgain map[[2]uint16]bool
}

func main() {
	opts := harness.ParseFlags(prog, "mockdcp-gocbcore")
	if opts.KVPort == 0 && opts.HTTPPort == 0 {
		harness.Usage(prog, "--kv-port or --http-port is required")
	}
	if (len(opts.CollectionFilter) > 0 || opts.Scope != "" || len(opts.Streams) > 0) && !opts.Collections {
		harness.Logf(prog, "--collection, --scope and --stream imply --collections")
		opts.Collections = true
	}
	if len(opts.Streams) > 0 && (len(opts.CollectionFilter) > 0 || opts.Scope != "") {
		harness.Usage(prog, "--stream carries its own filter: no --collection or --scope with it")
	}
	if len(opts.Streams) > 0 && opts.ResumeFrom != "" {
		harness.Usage(prog, "--resume-from is for a single stream per vbucket (no --stream)")
	}
	harness.SetGocbcoreLogger(prog, opts.Verbose)

	ev, err := harness.OpenEvents(opts.Out)
	if err != nil {
		fatalNoEvents("open --out: %v", err)
	}
	st := harness.NewState()
	if opts.ResumeFrom != "" {
		if st, err = harness.LoadState(opts.ResumeFrom); err != nil {
			ev.Emit("error", "message", err.Error())
			fatalNoEvents("%v", err)
		}
	}
	c := &consumer{opts: opts, ev: ev, stopCh: make(chan struct{}), reopening: map[[2]uint16]bool{},
		reopenAgain: map[[2]uint16]bool{}, bySID: map[uint16]*stream{}, useSID: len(opts.Streams) > 0}
	c.loadTLS()
	if c.useSID {
		for i := range opts.Streams {
			s := &stream{sid: uint16(i + 1), st: harness.NewState()}
			c.streams = append(c.streams, s)
			c.bySID[s.sid] = s
		}
	} else {
		c.streams = []*stream{{st: st}}
		c.bySID[0] = c.streams[0]
	}
	if opts.NoopInterval != "" {
		harness.Logf(prog, "note: MOCKDCP_NOOP_INTERVAL=%s not applied: gocbcore sets set_noop_interval 180 (memdbootstrap_dcp_client.go ExecEnableDcpNoop)", opts.NoopInterval)
	}
	if opts.Output != "" {
		go c.streams[0].st.KeepDocuments(opts.Output, opts.Progress, c.stopCh)
	}
	stop := harness.StopChannel(opts.NoStdin)
	go func() {
		why := <-stop
		harness.Logf(prog, "stopping: %s", why)
		c.shutdown(0)
	}()
	if err := c.run(); err != nil {
		c.fatal("%v", err)
	}
	select {} // shutdown() exits
}

func fatalNoEvents(format string, args ...any) {
	harness.Logf(prog, "fatal: "+format, args...)
	os.Exit(1)
}

func (c *consumer) fatal(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.ev.Emit("error", "message", msg)
	harness.Logf(prog, "fatal: %s", msg)
	c.shutdown(1)
}

var shutdownOnce sync.Once

// shutdown writes the state file, closes the agent and exits.
func (c *consumer) shutdown(code int) {
	shutdownOnce.Do(func() {
		c.stopping.Store(true)
		close(c.stopCh)
		// with several streams the output and state file are the first one's
		if c.opts.Output != "" {
			if err := c.streams[0].st.WriteOutput(c.opts.Output, c.opts.Progress); err != nil {
				harness.Logf(prog, "write --output: %v", err)
				code = 1
			}
		}
		if err := c.streams[0].st.Save(c.opts.State); err != nil {
			harness.Logf(prog, "write state: %v", err)
			code = 1
		}
		if c.agent != nil {
			done := make(chan struct{})
			go func() { _ = c.agent.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				harness.Logf(prog, "agent close timed out")
			}
		}
		c.ev.Close()
		os.Exit(code)
	})
	select {}
}

func (c *consumer) seedConfig() gocbcore.SeedConfig {
	var sc gocbcore.SeedConfig
	if c.opts.KVPort != 0 {
		sc.MemdAddrs = []string{fmt.Sprintf("%s:%d", c.opts.Host, c.opts.KVPort)}
	}
	if c.opts.HTTPPort != 0 {
		sc.HTTPAddrs = []string{fmt.Sprintf("%s:%d", c.opts.Host, c.opts.HTTPPort)}
	}
	return sc
}

// certAuth authenticates with a TLS client certificate, as gocb's
// CertificateAuthenticator does: one empty user/password pair, so no SASL is
// sent on KV connections and no Basic header on HTTP requests.
type certAuth struct{ cert tls.Certificate }

func (a certAuth) SupportsTLS() bool    { return true }
func (a certAuth) SupportsNonTLS() bool { return false }
func (a certAuth) Certificate(gocbcore.AuthCertRequest) (*tls.Certificate, error) {
	return &a.cert, nil
}
func (a certAuth) Credentials(gocbcore.AuthCredsRequest) ([]gocbcore.UserPassPair, error) {
	return []gocbcore.UserPassPair{{}}, nil
}

// loadTLS reads --tls-ca (and --client-cert/--client-key) once; a bad file
// is a usage error.
func (c *consumer) loadTLS() {
	if c.opts.TLSCA == "" {
		return
	}
	pem, err := os.ReadFile(c.opts.TLSCA)
	if err != nil {
		harness.Usage(prog, "--tls-ca: %v", err)
	}
	c.roots = x509.NewCertPool()
	if !c.roots.AppendCertsFromPEM(pem) {
		harness.Usage(prog, "--tls-ca %s: no PEM certificate", c.opts.TLSCA)
	}
	if c.opts.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(c.opts.ClientCert, c.opts.ClientKey)
		if err != nil {
			harness.Usage(prog, "--client-cert: %v", err)
		}
		c.clientCert = &cert
	}
}

func (c *consumer) securityConfig() gocbcore.SecurityConfig {
	sc := gocbcore.SecurityConfig{Auth: gocbcore.PasswordAuthProvider{Username: c.opts.User, Password: c.opts.Password}}
	if c.roots != nil {
		roots := c.roots
		sc.UseTLS = true
		sc.TLSRootCAProvider = func() *x509.CertPool { return roots }
	}
	if c.clientCert != nil {
		sc.Auth = certAuth{cert: *c.clientCert}
	}
	return sc
}

func (c *consumer) run() error {
	deadline := time.Now().Add(c.opts.ConnectTimeout)
	if err := c.resolveFilters(deadline); err != nil {
		return err
	}

	cfg := &gocbcore.DCPAgentConfig{
		UserAgent:         "mockdcp-interop-gocbcore",
		BucketName:        c.opts.Bucket,
		SeedConfig:        c.seedConfig(),
		SecurityConfig:    c.securityConfig(),
		CompressionConfig: gocbcore.CompressionConfig{Enabled: c.opts.DisableDecompression, DisableDecompression: c.opts.DisableDecompression},
		IoConfig:          gocbcore.IoConfig{UseCollections: c.opts.Collections},
		DCPConfig: gocbcore.DCPConfig{
			BufferSize:      c.opts.FlowControl,
			UseExpiryOpcode: c.opts.ExpiryOpcode,
			UseStreamID:     c.useSID,
			// --change-streams: history snapshots (a refusal fails the connection's setup)
			UseChangeStreams: c.opts.ChangeStreams,
		},
		DefaultRetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
	}
	agent, err := gocbcore.CreateDcpAgent(cfg, c.opts.Name, memd.DcpOpenFlagProducer)
	if err != nil {
		return fmt.Errorf("create DCP agent: %w", err)
	}
	c.agent = agent

	if err := c.waitReady(deadline); err != nil {
		return fmt.Errorf("cannot connect to %s (kv %d, http %d) within %s: %w (last bootstrap warning: %q)",
			c.opts.Host, c.opts.KVPort, c.opts.HTTPPort, c.opts.ConnectTimeout, err, harness.LastBootstrapWarning())
	}
	snap, err := agent.ConfigSnapshot()
	if err != nil {
		return fmt.Errorf("config snapshot: %w", err)
	}
	numVBs, err := snap.NumVbuckets()
	if err != nil {
		return fmt.Errorf("number of vbuckets: %w", err)
	}
	vbs, err := c.opts.VBucketList(numVBs)
	if err != nil {
		return err
	}
	harness.Logf(prog, "connected: %d vbuckets, streaming %d (%d stream(s) each), collections=%v", numVBs, len(vbs),
		len(c.streams), agent.HasCollectionsSupport())

	var wg sync.WaitGroup
	errs := make(chan error, len(vbs)*len(c.streams))
	for _, s := range c.streams {
		for _, vb := range vbs {
			wg.Add(1)
			go func(vb uint16, s *stream) {
				defer wg.Done()
				if err := c.openVB(vb, s); err != nil {
					errs <- fmt.Errorf("open stream vb %d sid %d: %w", vb, s.sid, err)
				}
			}(vb, s)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	c.ev.Emit("ready")
	harness.Logf(prog, "all %d streams open", len(vbs))
	return nil
}

func (c *consumer) waitReady(deadline time.Time) error {
	ch := make(chan error, 1)
	_, err := c.agent.WaitUntilReady(deadline, gocbcore.WaitUntilReadyOptions{
		RetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
	}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ch <- err })
	if err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Until(deadline) + 5*time.Second):
		return errors.New("WaitUntilReady did not call back")
	}
}

// resolveFilters turns the --collection / --scope / --stream filters into
// ids: a number is a collection id as given (decimal or 0x hex), a
// scope.collection name is looked up with GET_COLLECTION_ID, a scope name
// in the manifest (GET_COLLECTIONS_MANIFEST), through a short-lived regular
// agent.
func (c *consumer) resolveFilters(deadline time.Time) error {
	specs := map[*stream][]string{}
	if c.useSID {
		for i, s := range c.streams {
			specs[s] = strings.Split(c.opts.Streams[i], ",")
		}
	} else {
		var items []string
		items = append(items, c.opts.CollectionFilter...)
		if c.opts.Scope != "" {
			items = append(items, "scope:"+c.opts.Scope)
		}
		if len(items) == 0 {
			return nil
		}
		specs[c.streams[0]] = items
	}
	r := &resolver{c: c, deadline: deadline}
	defer r.close()
	for s, items := range specs {
		f := &gocbcore.OpenStreamFilterOptions{}
		scoped := false
		for _, v := range items {
			v = strings.TrimSpace(v)
			if name, ok := strings.CutPrefix(v, "scope:"); ok {
				id, err := r.scopeID(name)
				if err != nil {
					return err
				}
				f.ScopeID, scoped = id, true
				continue
			}
			if id, err := strconv.ParseUint(v, 0, 32); err == nil {
				f.CollectionIDs = append(f.CollectionIDs, uint32(id))
				continue
			}
			scope, coll, ok := strings.Cut(v, ".")
			if !ok || scope == "" || coll == "" {
				return fmt.Errorf("filter %q: want scope.collection, a collection id or scope:NAME", v)
			}
			id, err := r.collectionID(scope, coll)
			if err != nil {
				return err
			}
			f.CollectionIDs = append(f.CollectionIDs, id)
		}
		if scoped && len(f.CollectionIDs) > 0 {
			return fmt.Errorf("filter %v: a scope or collections, not both (gocbcore would drop the scope)", items)
		}
		harness.Logf(prog, "stream sid %d: filter collections %v scope %v (0x%x)", s.sid, f.CollectionIDs, scoped, f.ScopeID)
		s.filter = f
	}
	return nil
}

// resolver looks names up through a regular agent made on first use.
type resolver struct {
	c        *consumer
	deadline time.Time
	agent    *gocbcore.Agent
}

func (r *resolver) close() {
	if r.agent != nil {
		_ = r.agent.Close()
	}
}

func (r *resolver) get() (*gocbcore.Agent, error) {
	if r.agent != nil {
		return r.agent, nil
	}
	agent, err := gocbcore.CreateAgent(&gocbcore.AgentConfig{
		UserAgent:            "mockdcp-interop-gocbcore-lookup",
		BucketName:           r.c.opts.Bucket,
		SeedConfig:           r.c.seedConfig(),
		SecurityConfig:       r.c.securityConfig(),
		IoConfig:             gocbcore.IoConfig{UseCollections: true},
		DefaultRetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
	})
	if err != nil {
		return nil, fmt.Errorf("create lookup agent: %w", err)
	}
	r.agent = agent
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(r.deadline, gocbcore.WaitUntilReadyOptions{
		RetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
	}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		return nil, fmt.Errorf("lookup agent: %w", err)
	}
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("cannot connect to %s within %s (collection lookup): %w", r.c.opts.Host, r.c.opts.ConnectTimeout, err)
	}
	return agent, nil
}

func (r *resolver) collectionID(scope, coll string) (uint32, error) {
	agent, err := r.get()
	if err != nil {
		return 0, err
	}
	res := make(chan error, 1)
	var id uint32
	_, err = agent.GetCollectionID(scope, coll, gocbcore.GetCollectionIDOptions{Deadline: time.Now().Add(10 * time.Second)},
		func(r *gocbcore.GetCollectionIDResult, err error) {
			if err == nil {
				id = r.CollectionID
			}
			res <- err
		})
	if err == nil {
		err = <-res
	}
	if err != nil {
		return 0, fmt.Errorf("collection id of %s.%s: %w", scope, coll, err)
	}
	harness.Logf(prog, "collection %s.%s = 0x%x", scope, coll, id)
	return id, nil
}

func (r *resolver) scopeID(name string) (uint32, error) {
	agent, err := r.get()
	if err != nil {
		return 0, err
	}
	res := make(chan error, 1)
	var raw []byte
	_, err = agent.GetCollectionManifest(gocbcore.GetCollectionManifestOptions{Deadline: time.Now().Add(10 * time.Second)},
		func(r *gocbcore.GetCollectionManifestResult, err error) {
			if err == nil {
				raw = r.Manifest
			}
			res <- err
		})
	if err == nil {
		err = <-res
	}
	if err != nil {
		return 0, fmt.Errorf("collections manifest: %w", err)
	}
	var m gocbcore.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, fmt.Errorf("collections manifest %q: %w", raw, err)
	}
	for _, s := range m.Scopes {
		if s.Name == name {
			harness.Logf(prog, "scope %s = 0x%x", name, s.UID)
			return s.UID, nil
		}
	}
	return 0, fmt.Errorf("no scope %q in the manifest %s", name, raw)
}

// ---------------------------------------------------------------- streams

func (c *consumer) sleep(d time.Duration) bool {
	select {
	case <-c.stopCh:
		return false
	case <-time.After(d):
		return true
	}
}

func (c *consumer) failoverLog(vb uint16) ([]gocbcore.FailoverEntry, error) {
	ch := make(chan error, 1)
	var out []gocbcore.FailoverEntry
	op, err := c.agent.GetFailoverLog(vb, func(e []gocbcore.FailoverEntry, err error) {
		out = e
		ch <- err
	})
	if err != nil {
		return nil, err
	}
	select {
	case err = <-ch:
	case <-time.After(openTimeout):
		op.Cancel()
		err = <-ch
	}
	return out, err
}

func failoverJSON(entries []gocbcore.FailoverEntry) [][2]uint64 {
	out := make([][2]uint64, len(entries))
	for i, e := range entries {
		out[i] = [2]uint64{uint64(e.VbUUID), uint64(e.SeqNo)}
	}
	return out
}

// openVB opens stream s of vbucket vb from its recorded position, handling
// rollbacks and retrying other errors with backoff.
func (c *consumer) openVB(vb uint16, s *stream) error {
	backoff := 250 * time.Millisecond
	rollbacks := 0
	for attempt := 1; ; {
		if c.stopping.Load() {
			return nil
		}
		err := c.tryOpen(vb, s)
		if err == nil {
			return nil
		}
		var rb gocbcore.DCPRollbackError
		if errors.As(err, &rb) {
			rollbacks++
			if rollbacks > maxRollbacks {
				return fmt.Errorf("more than %d rollbacks in a row: %w", maxRollbacks, err)
			}
			// back to the last snapshot held whole at or below the server's seqno
			to := s.st.Rollback(vb, uint64(rb.SeqNo))
			c.emit(s.sid, "rollback", "vb", vb, "seqno", uint64(rb.SeqNo))
			harness.Logf(prog, "vb %d sid %d: rollback to %d, resuming from %d", vb, s.sid, rb.SeqNo, to)
			entries, ferr := c.failoverLog(vb)
			if ferr != nil {
				harness.Logf(prog, "vb %d: failover log after rollback: %v", vb, ferr)
			}
			var uuid uint64
			if len(entries) > 0 {
				uuid = uint64(entries[len(entries)-1].VbUUID)
			}
			for _, e := range entries { // newest first
				if uint64(e.SeqNo) <= to {
					uuid = uint64(e.VbUUID)
					break
				}
			}
			s.st.UpdateVB(vb, func(p *harness.VBState) { p.UUID = uuid })
			continue
		}
		if attempt >= maxOpenAttempts {
			return err
		}
		harness.Logf(prog, "vb %d sid %d: open attempt %d failed: %v (retry in %s)", vb, s.sid, attempt, err, backoff)
		attempt++
		if !c.sleep(backoff) {
			return nil
		}
		if backoff *= 2; backoff > 5*time.Second {
			backoff = 5 * time.Second
		}
	}
}

func (c *consumer) tryOpen(vb uint16, s *stream) error {
	pos, known := s.st.VB(vb)
	if !known {
		entries, err := c.failoverLog(vb)
		if err != nil {
			return fmt.Errorf("get failover log: %w", err)
		}
		pos = harness.VBState{}
		if len(entries) > 0 {
			pos.UUID = uint64(entries[0].VbUUID)
		}
		s.st.UpdateVB(vb, func(p *harness.VBState) { *p = pos })
	}
	if pos.Seqno < pos.SnapStart || pos.Seqno > pos.SnapEnd {
		// No item of the last marker arrived (or a SEQNO_ADVANCED moved us
		// past it): the previous snapshot is complete at pos.Seqno.
		pos.SnapStart, pos.SnapEnd = pos.Seqno, pos.Seqno
	}
	opts := gocbcore.OpenStreamOptions{
		FilterOptions: s.filter,
		RetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
	}
	if c.useSID {
		opts.StreamOptions = &gocbcore.OpenStreamStreamOptions{StreamID: s.sid}
	}
	ch := make(chan error, 1)
	// ACTIVE_VB_ONLY: a re-open routed by a map not yet updated after a move reaches
	// the old node, which kv_engine answers with a replica stream without the flag
	// (DcpProducer::checkConditionsForStreamRequest), and NOT_MY_VBUCKET with it,
	// which gocbcore retries on the map that answer carries; gocbcore's own DCP tests
	// pass it (testdcpsuite_test.go, v10.9.3), java-dcp-client always does (JDCP-245)
	op, err := c.agent.OpenStream(vb, memd.DcpStreamAddFlagActiveOnly, gocbcore.VbUUID(pos.UUID), gocbcore.SeqNo(pos.Seqno), endSeqNo,
		gocbcore.SeqNo(pos.SnapStart), gocbcore.SeqNo(pos.SnapEnd), c, opts,
		func(e []gocbcore.FailoverEntry, err error) {
			// Runs on the connection's read goroutine, before the stream's
			// first message is dispatched: record the open here so that
			// stream_open always precedes the stream's events.
			if err == nil {
				if len(e) > 0 {
					s.st.UpdateVB(vb, func(p *harness.VBState) { p.UUID = uint64(e[0].VbUUID) })
				}
				c.emit(s.sid, "stream_open", "vb", vb, "seqno", pos.Seqno, "uuid", pos.UUID,
					"snap_start", pos.SnapStart, "snap_end", pos.SnapEnd, "failover_log", failoverJSON(e))
			}
			ch <- err
		})
	if err != nil {
		return err
	}
	select {
	case err = <-ch:
	case <-time.After(openTimeout):
		op.Cancel()
		err = <-ch
	}
	if err != nil {
		return err
	}
	return nil
}

func (c *consumer) reopen(vb uint16, s *stream) {
	key := [2]uint16{vb, s.sid}
	c.mu.Lock()
	if c.reopening[key] {
		// A re-open is in flight, and the stream that just ended may be the one
		// it opened: gocbcore runs the open's callback and then dispatches the
		// STREAM_END right behind its SUCCESS on the same read goroutine, before
		// the re-open's goroutine has returned. Open once more after it.
		c.reopenAgain[key] = true
		c.mu.Unlock()
		return
	}
	c.reopening[key] = true
	c.mu.Unlock()
	go func() {
		for {
			if !c.sleep(100 * time.Millisecond) {
				break
			}
			if err := c.openVB(vb, s); err != nil && !c.stopping.Load() {
				msg := fmt.Sprintf("re-open stream vb %d sid %d: %v", vb, s.sid, err)
				c.emit(s.sid, "error", "message", msg, "vb", vb)
				harness.Logf(prog, "%s", msg)
			}
			c.mu.Lock()
			again := c.reopenAgain[key]
			delete(c.reopenAgain, key)
			c.mu.Unlock()
			if !again {
				break
			}
		}
		c.mu.Lock()
		delete(c.reopening, key)
		c.mu.Unlock()
	}()
}

// ---------------------------------------------------------------- observer

// emit writes an event; with stream ids it carries the stream's "sid".
func (c *consumer) emit(sid uint16, name string, kv ...any) {
	if c.useSID {
		kv = append(kv, "sid", sid)
	}
	c.ev.Emit(name, kv...)
}

// stream returns the stream a message came on (by its stream id), or nil for
// an id the consumer never opened (recorded as an error event).
func (c *consumer) stream(sid uint16, what string, vb uint16) *stream {
	if s := c.bySID[sid]; s != nil {
		return s
	}
	c.ev.Emit("error", "message", fmt.Sprintf("%s on vb %d with unknown stream id %d", what, vb, sid), "vb", vb)
	return nil
}

func (c *consumer) SnapshotMarker(m gocbcore.DcpSnapshotMarker) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	s := c.stream(m.StreamID, "snapshot marker", m.VbID)
	if s == nil {
		return
	}
	c.emit(s.sid, "snapshot", "vb", m.VbID, "start", m.StartSeqNo, "end", m.EndSeqNo, "flags", uint32(m.SnapshotType))
	s.st.UpdateVB(m.VbID, func(p *harness.VBState) { p.SnapStart, p.SnapEnd = m.StartSeqNo, m.EndSeqNo })
}

func (c *consumer) Mutation(m gocbcore.DcpMutation) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	s := c.stream(m.StreamID, "mutation", m.VbID)
	if s == nil {
		return
	}
	kv := []any{"vb", m.VbID, "seqno", m.SeqNo, "rev", m.RevNo, "cas", m.Cas, "key", string(m.Key),
		"collection", m.CollectionID}
	kv = append(kv, harness.Value(m.Value)...)
	kv = append(kv, "flags", m.Flags, "expiry", m.Expiry, "datatype", m.Datatype)
	c.emit(s.sid, "mutation", kv...)
	s.st.AddVersion(m.CollectionID, string(m.Key), harness.Version{Seqno: m.SeqNo, VB: m.VbID, Value: string(m.Value),
		Rev: m.RevNo, Cas: m.Cas})
	s.advance(m.VbID, m.SeqNo)
}

func (c *consumer) Deletion(m gocbcore.DcpDeletion) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	s := c.stream(m.StreamID, "deletion", m.VbID)
	if s == nil {
		return
	}
	kv := []any{"vb", m.VbID, "seqno", m.SeqNo, "rev", m.RevNo, "cas", m.Cas, "key", string(m.Key),
		"collection", m.CollectionID}
	kv = append(kv, harness.Value(m.Value)...)
	kv = append(kv, "flags", 0, "expiry", 0, "datatype", m.Datatype, "delete_time", m.DeleteTime)
	c.emit(s.sid, "deletion", kv...)
	s.st.AddVersion(m.CollectionID, string(m.Key), harness.Version{Seqno: m.SeqNo, VB: m.VbID, Deleted: true,
		Rev: m.RevNo, Cas: m.Cas})
	s.advance(m.VbID, m.SeqNo)
}

func (c *consumer) Expiration(m gocbcore.DcpExpiration) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	s := c.stream(m.StreamID, "expiration", m.VbID)
	if s == nil {
		return
	}
	c.emit(s.sid, "expiration", "vb", m.VbID, "seqno", m.SeqNo, "rev", m.RevNo, "cas", m.Cas, "key", string(m.Key),
		"collection", m.CollectionID, "value", "", "flags", 0, "expiry", 0, "delete_time", m.DeleteTime)
	s.st.AddVersion(m.CollectionID, string(m.Key), harness.Version{Seqno: m.SeqNo, VB: m.VbID, Deleted: true,
		Rev: m.RevNo, Cas: m.Cas})
	s.advance(m.VbID, m.SeqNo)
}

func (s *stream) advance(vb uint16, seqno uint64) {
	s.st.Advance(vb, seqno)
}

func (c *consumer) End(e gocbcore.DcpStreamEnd, err error) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	s := c.stream(e.StreamID, "stream end", e.VbID)
	if s == nil {
		return
	}
	reason := "ok"
	if err != nil {
		reason = err.Error()
	}
	c.emit(s.sid, "stream_end", "vb", e.VbID, "reason", reason)
	if c.stopping.Load() || err == nil {
		return
	}
	if errors.Is(err, gocbcore.ErrDCPStreamFilterEmpty) {
		// every collection of the filter was dropped: nothing more can come
		harness.Logf(prog, "vb %d sid %d: stream ended: %s; not re-opened", e.VbID, s.sid, reason)
		return
	}
	harness.Logf(prog, "vb %d sid %d: stream ended: %s; re-opening", e.VbID, s.sid, reason)
	c.reopen(e.VbID, s)
}

// system emits a system event of stream sid and moves its position.
func (c *consumer) system(sid, vb uint16, seqno uint64, kv ...any) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	s := c.stream(sid, "system event", vb)
	if s == nil {
		return
	}
	c.emit(s.sid, "system_event", append([]any{kv[0], kv[1], "vb", vb, "seqno", seqno}, kv[2:]...)...)
	s.advance(vb, seqno)
}

func (c *consumer) CreateCollection(e gocbcore.DcpCollectionCreation) {
	if s := c.bySID[e.StreamID]; s != nil {
		s.st.NameCollection(e.CollectionID, e.ScopeID, string(e.Key))
	}
	c.system(e.StreamID, e.VbID, e.SeqNo, "type", "create_collection",
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "collection", e.CollectionID,
		"name", string(e.Key), "ttl", e.Ttl, "version", e.Version)
}

func (c *consumer) DeleteCollection(e gocbcore.DcpCollectionDeletion) {
	if s := c.bySID[e.StreamID]; s != nil {
		s.st.ForgetCollection(e.VbID, e.CollectionID, e.SeqNo)
	}
	c.system(e.StreamID, e.VbID, e.SeqNo, "type", "delete_collection",
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "collection", e.CollectionID, "version", e.Version)
}

func (c *consumer) FlushCollection(e gocbcore.DcpCollectionFlush) {
	if s := c.bySID[e.StreamID]; s != nil {
		s.st.ForgetCollection(e.VbID, e.CollectionID, e.SeqNo)
	}
	c.system(e.StreamID, e.VbID, e.SeqNo, "type", "flush_collection",
		"manifest_uid", e.ManifestUID, "collection", e.CollectionID, "version", e.Version)
}

func (c *consumer) CreateScope(e gocbcore.DcpScopeCreation) {
	if s := c.bySID[e.StreamID]; s != nil {
		s.st.NameScope(e.ScopeID, string(e.Key))
	}
	c.system(e.StreamID, e.VbID, e.SeqNo, "type", "create_scope",
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "name", string(e.Key), "version", e.Version)
}

func (c *consumer) DeleteScope(e gocbcore.DcpScopeDeletion) {
	c.system(e.StreamID, e.VbID, e.SeqNo, "type", "delete_scope",
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "version", e.Version)
}

func (c *consumer) ModifyCollection(e gocbcore.DcpCollectionModification) {
	c.system(e.StreamID, e.VbID, e.SeqNo, "type", "modify_collection",
		"manifest_uid", e.ManifestUID, "collection", e.CollectionID, "ttl", e.Ttl, "version", e.Version)
}

func (c *consumer) OSOSnapshot(e gocbcore.DcpOSOSnapshot) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.emit(e.StreamID, "oso_snapshot", "vb", e.VbID, "flags", e.SnapshotType)
}

func (c *consumer) SeqNoAdvanced(e gocbcore.DcpSeqNoAdvanced) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	s := c.stream(e.StreamID, "seqno advanced", e.VbID)
	if s == nil {
		return
	}
	c.emit(s.sid, "seqno_advanced", "vb", e.VbID, "seqno", e.SeqNo)
	s.advance(e.VbID, e.SeqNo)
}
