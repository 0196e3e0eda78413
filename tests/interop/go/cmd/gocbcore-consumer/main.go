// gocbcore-consumer streams a bucket with gocbcore's DCPAgent and records
// every event it sees as JSON lines (see tests/interop/go/README.md).
package main

import (
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

type consumer struct {
	opts   *harness.Options
	ev     *harness.Events
	st     *harness.State
	agent  *gocbcore.DCPAgent
	filter *gocbcore.OpenStreamFilterOptions
	stopCh chan struct{}

	stopping atomic.Bool

	mu        sync.Mutex
	reopening map[uint16]bool
}

func main() {
	opts := harness.ParseFlags(prog, "mockdcp-gocbcore")
	if opts.KVPort == 0 && opts.HTTPPort == 0 {
		harness.Usage(prog, "--kv-port or --http-port is required")
	}
	if len(opts.CollectionFilter) > 0 && !opts.Collections {
		harness.Logf(prog, "--collection implies --collections")
		opts.Collections = true
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
	c := &consumer{opts: opts, ev: ev, st: st, stopCh: make(chan struct{}), reopening: map[uint16]bool{}}
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
		if err := c.st.Save(c.opts.State); err != nil {
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

func (c *consumer) securityConfig() gocbcore.SecurityConfig {
	return gocbcore.SecurityConfig{Auth: gocbcore.PasswordAuthProvider{Username: c.opts.User, Password: c.opts.Password}}
}

func (c *consumer) run() error {
	deadline := time.Now().Add(c.opts.ConnectTimeout)
	if err := c.resolveFilter(deadline); err != nil {
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
	harness.Logf(prog, "connected: %d vbuckets, streaming %d, collections=%v", numVBs, len(vbs), agent.HasCollectionsSupport())

	var wg sync.WaitGroup
	errs := make(chan error, len(vbs))
	for _, vb := range vbs {
		wg.Add(1)
		go func(vb uint16) {
			defer wg.Done()
			if err := c.openVB(vb); err != nil {
				errs <- fmt.Errorf("open stream vb %d: %w", vb, err)
			}
		}(vb)
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

// resolveFilter turns --collection values into collection ids: numbers are
// used as given (decimal or 0x hex), scope.collection names are looked up
// with GET_COLLECTION_ID through a short-lived regular agent.
func (c *consumer) resolveFilter(deadline time.Time) error {
	if len(c.opts.CollectionFilter) == 0 {
		return nil
	}
	f := &gocbcore.OpenStreamFilterOptions{}
	var names [][2]string
	for _, v := range c.opts.CollectionFilter {
		if id, err := strconv.ParseUint(v, 0, 32); err == nil {
			f.CollectionIDs = append(f.CollectionIDs, uint32(id))
			continue
		}
		scope, coll, ok := strings.Cut(v, ".")
		if !ok || scope == "" || coll == "" {
			return fmt.Errorf("--collection %q: want scope.collection or a collection id", v)
		}
		names = append(names, [2]string{scope, coll})
	}
	if len(names) > 0 {
		agent, err := gocbcore.CreateAgent(&gocbcore.AgentConfig{
			UserAgent:            "mockdcp-interop-gocbcore-lookup",
			BucketName:           c.opts.Bucket,
			SeedConfig:           c.seedConfig(),
			SecurityConfig:       c.securityConfig(),
			IoConfig:             gocbcore.IoConfig{UseCollections: true},
			DefaultRetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
		})
		if err != nil {
			return fmt.Errorf("create lookup agent: %w", err)
		}
		defer agent.Close()
		ready := make(chan error, 1)
		if _, err := agent.WaitUntilReady(deadline, gocbcore.WaitUntilReadyOptions{
			RetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
		}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
			return fmt.Errorf("lookup agent: %w", err)
		}
		if err := <-ready; err != nil {
			return fmt.Errorf("cannot connect to %s within %s (collection lookup): %w", c.opts.Host, c.opts.ConnectTimeout, err)
		}
		for _, n := range names {
			res := make(chan error, 1)
			var id uint32
			_, err := agent.GetCollectionID(n[0], n[1], gocbcore.GetCollectionIDOptions{Deadline: time.Now().Add(10 * time.Second)},
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
				return fmt.Errorf("collection id of %s.%s: %w", n[0], n[1], err)
			}
			harness.Logf(prog, "collection %s.%s = 0x%x", n[0], n[1], id)
			f.CollectionIDs = append(f.CollectionIDs, id)
		}
	}
	c.filter = f
	return nil
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

// openVB opens vbucket vb's stream from its recorded position, handling
// rollbacks and retrying other errors with backoff.
func (c *consumer) openVB(vb uint16) error {
	backoff := 250 * time.Millisecond
	rollbacks := 0
	for attempt := 1; ; {
		if c.stopping.Load() {
			return nil
		}
		err := c.tryOpen(vb)
		if err == nil {
			return nil
		}
		var rb gocbcore.DCPRollbackError
		if errors.As(err, &rb) {
			rollbacks++
			if rollbacks > maxRollbacks {
				return fmt.Errorf("more than %d rollbacks in a row: %w", maxRollbacks, err)
			}
			to := uint64(rb.SeqNo)
			c.ev.Emit("rollback", "vb", vb, "seqno", to)
			harness.Logf(prog, "vb %d: rollback to %d", vb, to)
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
			c.st.Rollback(vb, to)
			c.st.UpdateVB(vb, func(s *harness.VBState) {
				s.Seqno, s.SnapStart, s.SnapEnd, s.UUID = to, to, to, uuid
			})
			continue
		}
		if attempt >= maxOpenAttempts {
			return err
		}
		harness.Logf(prog, "vb %d: open attempt %d failed: %v (retry in %s)", vb, attempt, err, backoff)
		attempt++
		if !c.sleep(backoff) {
			return nil
		}
		if backoff *= 2; backoff > 5*time.Second {
			backoff = 5 * time.Second
		}
	}
}

func (c *consumer) tryOpen(vb uint16) error {
	pos, known := c.st.VB(vb)
	if !known {
		entries, err := c.failoverLog(vb)
		if err != nil {
			return fmt.Errorf("get failover log: %w", err)
		}
		pos = harness.VBState{}
		if len(entries) > 0 {
			pos.UUID = uint64(entries[0].VbUUID)
		}
		c.st.UpdateVB(vb, func(s *harness.VBState) { *s = pos })
	}
	if pos.Seqno < pos.SnapStart || pos.Seqno > pos.SnapEnd {
		// No item of the last marker arrived (or a SEQNO_ADVANCED moved us
		// past it): the previous snapshot is complete at pos.Seqno.
		pos.SnapStart, pos.SnapEnd = pos.Seqno, pos.Seqno
	}
	opts := gocbcore.OpenStreamOptions{
		FilterOptions: c.filter,
		RetryStrategy: gocbcore.NewBestEffortRetryStrategy(nil),
	}
	ch := make(chan error, 1)
	op, err := c.agent.OpenStream(vb, 0, gocbcore.VbUUID(pos.UUID), gocbcore.SeqNo(pos.Seqno), endSeqNo,
		gocbcore.SeqNo(pos.SnapStart), gocbcore.SeqNo(pos.SnapEnd), c, opts,
		func(e []gocbcore.FailoverEntry, err error) {
			// Runs on the connection's read goroutine, before the stream's
			// first message is dispatched: record the open here so that
			// stream_open always precedes the stream's events.
			if err == nil {
				if len(e) > 0 {
					c.st.UpdateVB(vb, func(s *harness.VBState) { s.UUID = uint64(e[0].VbUUID) })
				}
				c.ev.Emit("stream_open", "vb", vb, "seqno", pos.Seqno, "uuid", pos.UUID,
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

func (c *consumer) reopen(vb uint16) {
	c.mu.Lock()
	if c.reopening[vb] {
		c.mu.Unlock()
		return
	}
	c.reopening[vb] = true
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.reopening, vb)
			c.mu.Unlock()
		}()
		if !c.sleep(100 * time.Millisecond) {
			return
		}
		if err := c.openVB(vb); err != nil && !c.stopping.Load() {
			msg := fmt.Sprintf("re-open stream vb %d: %v", vb, err)
			c.ev.Emit("error", "message", msg, "vb", vb)
			harness.Logf(prog, "%s", msg)
		}
	}()
}

// ---------------------------------------------------------------- observer

func (c *consumer) advance(vb uint16, seqno uint64) {
	c.st.UpdateVB(vb, func(s *harness.VBState) { s.Seqno = seqno })
}

func (c *consumer) SnapshotMarker(m gocbcore.DcpSnapshotMarker) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("snapshot", "vb", m.VbID, "start", m.StartSeqNo, "end", m.EndSeqNo, "flags", uint32(m.SnapshotType))
	c.st.UpdateVB(m.VbID, func(s *harness.VBState) { s.SnapStart, s.SnapEnd = m.StartSeqNo, m.EndSeqNo })
}

func (c *consumer) Mutation(m gocbcore.DcpMutation) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	kv := []any{"vb", m.VbID, "seqno", m.SeqNo, "rev", m.RevNo, "cas", m.Cas, "key", string(m.Key),
		"collection", m.CollectionID}
	kv = append(kv, harness.Value(m.Value)...)
	kv = append(kv, "flags", m.Flags, "expiry", m.Expiry, "datatype", m.Datatype)
	c.ev.Emit("mutation", kv...)
	c.st.AddVersion(m.CollectionID, string(m.Key), harness.Version{Seqno: m.SeqNo, VB: m.VbID, Value: string(m.Value)})
	c.advance(m.VbID, m.SeqNo)
}

func (c *consumer) Deletion(m gocbcore.DcpDeletion) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	kv := []any{"vb", m.VbID, "seqno", m.SeqNo, "rev", m.RevNo, "cas", m.Cas, "key", string(m.Key),
		"collection", m.CollectionID}
	kv = append(kv, harness.Value(m.Value)...)
	kv = append(kv, "flags", 0, "expiry", 0, "datatype", m.Datatype, "delete_time", m.DeleteTime)
	c.ev.Emit("deletion", kv...)
	c.st.AddVersion(m.CollectionID, string(m.Key), harness.Version{Seqno: m.SeqNo, VB: m.VbID, Deleted: true})
	c.advance(m.VbID, m.SeqNo)
}

func (c *consumer) Expiration(m gocbcore.DcpExpiration) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("expiration", "vb", m.VbID, "seqno", m.SeqNo, "rev", m.RevNo, "cas", m.Cas, "key", string(m.Key),
		"collection", m.CollectionID, "value", "", "flags", 0, "expiry", 0, "delete_time", m.DeleteTime)
	c.st.AddVersion(m.CollectionID, string(m.Key), harness.Version{Seqno: m.SeqNo, VB: m.VbID, Deleted: true})
	c.advance(m.VbID, m.SeqNo)
}

func (c *consumer) End(e gocbcore.DcpStreamEnd, err error) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	reason := "ok"
	if err != nil {
		reason = err.Error()
	}
	c.ev.Emit("stream_end", "vb", e.VbID, "reason", reason)
	if c.stopping.Load() || err == nil {
		return
	}
	harness.Logf(prog, "vb %d: stream ended: %s; re-opening", e.VbID, reason)
	c.reopen(e.VbID)
}

func (c *consumer) CreateCollection(e gocbcore.DcpCollectionCreation) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("system_event", "type", "create_collection", "vb", e.VbID, "seqno", e.SeqNo,
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "collection", e.CollectionID,
		"name", string(e.Key), "ttl", e.Ttl, "version", e.Version)
	c.advance(e.VbID, e.SeqNo)
}

func (c *consumer) DeleteCollection(e gocbcore.DcpCollectionDeletion) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("system_event", "type", "delete_collection", "vb", e.VbID, "seqno", e.SeqNo,
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "collection", e.CollectionID, "version", e.Version)
	c.advance(e.VbID, e.SeqNo)
}

func (c *consumer) FlushCollection(e gocbcore.DcpCollectionFlush) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("system_event", "type", "flush_collection", "vb", e.VbID, "seqno", e.SeqNo,
		"manifest_uid", e.ManifestUID, "collection", e.CollectionID, "version", e.Version)
	c.advance(e.VbID, e.SeqNo)
}

func (c *consumer) CreateScope(e gocbcore.DcpScopeCreation) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("system_event", "type", "create_scope", "vb", e.VbID, "seqno", e.SeqNo,
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "name", string(e.Key), "version", e.Version)
	c.advance(e.VbID, e.SeqNo)
}

func (c *consumer) DeleteScope(e gocbcore.DcpScopeDeletion) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("system_event", "type", "delete_scope", "vb", e.VbID, "seqno", e.SeqNo,
		"manifest_uid", e.ManifestUID, "scope", e.ScopeID, "version", e.Version)
	c.advance(e.VbID, e.SeqNo)
}

func (c *consumer) ModifyCollection(e gocbcore.DcpCollectionModification) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("system_event", "type", "modify_collection", "vb", e.VbID, "seqno", e.SeqNo,
		"manifest_uid", e.ManifestUID, "collection", e.CollectionID, "ttl", e.Ttl, "version", e.Version)
	c.advance(e.VbID, e.SeqNo)
}

func (c *consumer) OSOSnapshot(e gocbcore.DcpOSOSnapshot) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("oso_snapshot", "vb", e.VbID, "flags", e.SnapshotType)
}

func (c *consumer) SeqNoAdvanced(e gocbcore.DcpSeqNoAdvanced) {
	if c.stopping.Load() {
		return // the state file is written: record nothing more
	}
	c.ev.Emit("seqno_advanced", "vb", e.VbID, "seqno", e.SeqNo)
	c.advance(e.VbID, e.SeqNo)
}
