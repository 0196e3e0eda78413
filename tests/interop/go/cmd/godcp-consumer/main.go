// godcp-consumer streams a bucket with Trendyol go-dcp and records what its
// listener sees as JSON lines (see tests/interop/go/README.md).
package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dcp "github.com/Trendyol/go-dcp"
	"github.com/Trendyol/go-dcp/config"
	"github.com/Trendyol/go-dcp/logger"
	"github.com/Trendyol/go-dcp/models"
	"github.com/sirupsen/logrus"

	"mockdcp/interop/internal/harness"
)

const prog = "godcp-consumer"

type consumer struct {
	opts     *harness.Options
	ev       *harness.Events
	st       *harness.State
	vbFilter map[uint16]bool // nil = all
	stopping atomic.Bool
	// closed on stop: the --output writer ends (finish writes it last)
	outputDone chan struct{}
	// files removed on exit
	cleanup []string
}

func main() {
	opts := harness.ParseFlags(prog, "mockgroup")
	if opts.HTTPPort == 0 {
		harness.Usage(prog, "--http-port is required (go-dcp bootstraps over HTTP only)")
	}
	if opts.ResumeFrom != "" {
		harness.Usage(prog, "--resume-from is not supported by godcp-consumer")
	}
	if opts.ReadmeConfig && opts.APIPort == 0 && opts.Env {
		// go-dcp's API listens on 8080 by default: mockdcp check runs scenarios at once
		opts.APIPort = freePort()
	}
	harness.SetGocbcoreLogger(prog, opts.Verbose)
	if opts.ChangeStreams {
		harness.Usage(prog, "--change-streams: go-dcp decides itself (on when GET /pools reports >= 7.2.0 and the bucket is Magma)")
	}
	if opts.ExpiryOpcode {
		harness.Logf(prog, "note: --expiry-opcode ignored; go-dcp enables it itself for server versions >= 6.5.0 (GET /pools)")
	}
	if !opts.Collections {
		harness.Logf(prog, "note: go-dcp always connects collection-aware (IoConfig.UseCollections=true)")
	}

	ev, err := harness.OpenEvents(opts.Out)
	if err != nil {
		harness.Logf(prog, "fatal: open --out: %v", err)
		os.Exit(1)
	}
	c := &consumer{opts: opts, ev: ev, st: harness.NewState(), outputDone: make(chan struct{})}
	if opts.VBuckets != "" && opts.VBuckets != "all" {
		vbs, err := opts.VBucketList(0)
		if err != nil {
			harness.Usage(prog, "%v", err)
		}
		c.vbFilter = map[uint16]bool{}
		for _, vb := range vbs {
			c.vbFilter[vb] = true
		}
		harness.Logf(prog, "note: go-dcp streams every vbucket of its member; --vbuckets filters events client-side")
	}

	cfg, err := c.config()
	if err != nil {
		harness.Usage(prog, "%v", err)
	}
	logger.Log = &logger.Loggers{Logrus: c.logrus()}

	if opts.NoopInterval != "" {
		harness.Logf(prog, "note: MOCKDCP_NOOP_INTERVAL=%s not applied: go-dcp has no noop setting (gocbcore sends set_noop_interval 180)", opts.NoopInterval)
	}
	if opts.Output != "" {
		go c.st.KeepDocuments(opts.Output, opts.Progress, c.outputDone)
	}
	stop := harness.StopChannel(opts.NoStdin)

	// NewDcp bootstraps synchronously (HTTP config, KV agent, ping, GET
	// /pools, GET /pools/default/buckets/<b>, DCP agent); run it under a
	// watchdog so a stuck bootstrap still ends in exit 1.
	type result struct {
		d   dcp.Dcp
		err error
	}
	created := make(chan result, 1)
	go func() {
		d, err := dcp.NewExtendedDcp(cfg, c)
		created <- result{d, err}
	}()
	var connector dcp.Dcp
	select {
	case r := <-created:
		if r.err != nil {
			c.fatal("cannot connect to %s within %s: %v (last bootstrap warning: %q)", cfg.Hosts[0], opts.ConnectTimeout, r.err,
				harness.LastBootstrapWarning())
		}
		connector = r.d
	case <-time.After(opts.ConnectTimeout + 10*time.Second):
		c.fatal("cannot connect to %s: bootstrap did not finish within %s", cfg.Hosts[0], opts.ConnectTimeout+10*time.Second)
	case why := <-stop:
		harness.Logf(prog, "stopping during bootstrap: %s", why)
		c.finish(nil, nil, 0)
	}

	startDone := make(chan struct{})
	go func() {
		defer close(startDone)
		connector.Start() // returns when go-dcp closes (Close, SIGTERM, or all streams ended)
	}()
	select {
	case <-connector.WaitUntilReady():
		c.ev.Emit("ready")
		harness.Logf(prog, "streams open")
	case <-startDone:
		c.fatal("go-dcp stopped before it became ready")
	case why := <-stop:
		harness.Logf(prog, "stopping before ready: %s", why)
		c.finish(connector, startDone, 0)
	}
	select {
	case why := <-stop:
		harness.Logf(prog, "stopping: %s", why)
		c.finish(connector, startDone, 0)
	case <-startDone:
		// go-dcp tore itself down (every stream ended OK/CLOSED); keep the
		// process until the test stops it so the state can still be read.
		c.ev.Emit("stopped", "message", "go-dcp closed all streams")
		harness.Logf(prog, "go-dcp stopped by itself; waiting for stdin EOF / SIGTERM")
		why := <-stop
		harness.Logf(prog, "stopping: %s", why)
		c.finish(nil, nil, 0)
	}
}

// readmeConfig is go-dcp's README configuration: only the required fields,
// every default as go-dcp applies it (couchbase membership and metadata in the
// bucket itself, rollback mitigation, health check and API on). Two settings
// are not the README's: the API port (parallel test runs), and the couchbase
// membership timings (rebalance delay 30 s, heartbeats 10 s tolerated for 1
// min, monitor every 30 s by default), shortened so that a restart rejoins in
// seconds; the membership type itself stays go-dcp's default.
func (c *consumer) readmeConfig() *config.Dcp {
	o := c.opts
	cfg := &config.Dcp{
		Hosts:            []string{fmt.Sprintf("http://%s:%d", o.Host, o.HTTPPort)},
		Username:         o.User,
		Password:         o.Password,
		BucketName:       o.Bucket,
		SecureConnection: o.TLSCA != "",
		RootCAPath:       o.TLSCA,
		Dcp: config.ExternalDcp{
			Group: config.DCPGroup{
				Name: o.Name,
				Membership: config.DCPGroupMembership{
					RebalanceDelay: time.Second,
					Config: map[string]string{
						"heartbeatInterval":          "500ms",
						"heartbeatToleranceDuration": "1s",
						"monitorInterval":            "1s",
					},
				},
			},
		},
		Logging: config.Logging{Level: "info"},
	}
	if o.APIPort > 0 {
		cfg.API.Port = o.APIPort
	}
	if o.FlowControl > 0 { // a scenario's buffer size (MOCKDCP_BUFFER_SIZE)
		cfg.Dcp.BufferSize = o.FlowControl
	}
	if o.OutsideBucket {
		// the README's static-membership example, and checkpoints in a file: go-dcp
		// writes nothing into the bucket it streams (a scenario's seqnos stay its own)
		cfg.Dcp.Group.Membership = config.DCPGroupMembership{Type: "static", MemberNumber: 1, TotalMembers: 1}
		cfg.Metadata = config.Metadata{Type: config.MetadataTypeFile,
			Config: map[string]string{config.FileMetadataFileNameConfig: c.metadataFile()}}
	}
	return cfg
}

func (c *consumer) config() (*config.Dcp, error) {
	o := c.opts
	if o.ReadmeConfig {
		return c.readmeConfig(), nil
	}
	// --tls-ca: secureConnection and rootCAPath, as go-dcp's README sets them;
	// the host stays http://HOST:PORT (go-dcp resolves it as a connection string)
	// with PORT the HTTPS port
	cfg := &config.Dcp{
		Hosts:            []string{fmt.Sprintf("http://%s:%d", o.Host, o.HTTPPort)},
		Username:         o.User,
		Password:         o.Password,
		BucketName:       o.Bucket,
		SecureConnection: o.TLSCA != "",
		RootCAPath:       o.TLSCA,
		Metadata:         config.Metadata{Type: config.MetadataTypeNoop},
		Dcp: config.ExternalDcp{
			Group: config.DCPGroup{
				Name:       o.Name,
				Membership: config.DCPGroupMembership{Type: "static", MemberNumber: 1, TotalMembers: 1},
			},
			ConnectionTimeout: o.ConnectTimeout,
		},
		HealthCheck:        config.HealthCheck{Disabled: true},
		RollbackMitigation: config.RollbackMitigation{Disabled: true},
		API:                config.API{Disabled: true},
		Checkpoint:         config.Checkpoint{AutoReset: "earliest"},
		ConnectionTimeout:  o.ConnectTimeout,
		Logging:            config.Logging{Level: "info"},
	}
	if o.FlowControl > 0 {
		cfg.Dcp.BufferSize = o.FlowControl
	}
	if len(o.Streams) > 0 {
		return nil, fmt.Errorf("--stream: go-dcp has no stream ids")
	}
	if o.ClientCert != "" {
		// couchbase.CreateSecurityConfig always builds a PasswordAuthProvider
		return nil, fmt.Errorf("--client-cert: go-dcp authenticates with a password only")
	}
	if o.Scope != "" && len(o.CollectionFilter) == 0 {
		return nil, fmt.Errorf("--scope: go-dcp has no scope filter (give its collections with --collection)")
	}
	if len(o.CollectionFilter) > 0 {
		scope := o.Scope
		for _, v := range o.CollectionFilter {
			s, coll, ok := strings.Cut(v, ".")
			if !ok || s == "" || coll == "" {
				return nil, fmt.Errorf("--collection %q: go-dcp needs scope.collection names", v)
			}
			if scope != "" && s != scope {
				return nil, fmt.Errorf("go-dcp streams one scope only (got %s and %s)", scope, s)
			}
			scope = s
			cfg.CollectionNames = append(cfg.CollectionNames, coll)
		}
		cfg.ScopeName = scope
	}
	return cfg, nil
}

func (c *consumer) fatal(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.ev.Emit("error", "message", msg)
	harness.Logf(prog, "fatal: %s", msg)
	c.finish(nil, nil, 1)
}

var finishOnce sync.Once

// finish stops recording, closes go-dcp (if running), writes the state
// file and exits.
func (c *consumer) finish(connector dcp.Dcp, startDone chan struct{}, code int) {
	finishOnce.Do(func() {
		c.stopping.Store(true)
		close(c.outputDone)
		if c.opts.Output != "" { // first: mockdcp check kills a consumer 5 s after SIGTERM
			if err := c.st.WriteOutput(c.opts.Output, c.opts.Progress); err != nil {
				harness.Logf(prog, "write --output: %v", err)
				code = 1
			}
		}
		if connector != nil {
			go connector.Close()
			select {
			case <-startDone:
			case <-time.After(10 * time.Second):
				harness.Logf(prog, "go-dcp close timed out")
			}
		}
		if err := c.st.Save(c.opts.State); err != nil {
			harness.Logf(prog, "write state: %v", err)
			code = 1
		}
		c.ev.Close()
		for _, f := range c.cleanup {
			_ = os.Remove(f)
		}
		os.Exit(code)
	})
	select {}
}

// ---------------------------------------------------------------- models.Consumer

func (c *consumer) wanted(vb uint16) bool {
	return c.vbFilter == nil || c.vbFilter[vb]
}

func snapFields(o *models.Offset) []any {
	if o == nil || o.SnapshotMarker == nil {
		return nil
	}
	return []any{"snap_start", o.StartSeqNo, "snap_end", o.EndSeqNo}
}

func (c *consumer) ConsumeEvent(ctx *models.ListenerContext) {
	defer ctx.Ack()
	if c.stopping.Load() {
		return
	}
	switch e := ctx.Event.(type) {
	case models.DcpMutation:
		if !c.wanted(e.VbID) {
			return
		}
		kv := []any{"vb", e.VbID, "seqno", e.SeqNo, "rev", e.RevNo, "cas", e.Cas, "key", string(e.Key),
			"collection", e.CollectionID}
		kv = append(kv, harness.Value(e.Value)...)
		kv = append(kv, "flags", e.Flags, "expiry", e.Expiry, "datatype", e.Datatype, "collection_name", e.CollectionName)
		kv = append(kv, snapFields(e.Offset)...)
		c.ev.Emit("mutation", kv...)
		c.name(e.CollectionID, e.CollectionName)
		c.st.AddVersion(e.CollectionID, string(e.Key), harness.Version{Seqno: e.SeqNo, VB: e.VbID, Value: string(e.Value),
			Rev: e.RevNo, Cas: e.Cas})
	case models.DcpDeletion:
		if !c.wanted(e.VbID) {
			return
		}
		kv := []any{"vb", e.VbID, "seqno", e.SeqNo, "rev", e.RevNo, "cas", e.Cas, "key", string(e.Key),
			"collection", e.CollectionID}
		kv = append(kv, harness.Value(e.Value)...)
		kv = append(kv, "flags", 0, "expiry", 0, "datatype", e.Datatype, "collection_name", e.CollectionName)
		kv = append(kv, snapFields(e.Offset)...)
		c.ev.Emit("deletion", kv...)
		c.name(e.CollectionID, e.CollectionName)
		c.st.AddVersion(e.CollectionID, string(e.Key), harness.Version{Seqno: e.SeqNo, VB: e.VbID, Deleted: true,
			Rev: e.RevNo, Cas: e.Cas})
	case models.DcpExpiration:
		if !c.wanted(e.VbID) {
			return
		}
		kv := []any{"vb", e.VbID, "seqno", e.SeqNo, "rev", e.RevNo, "cas", e.Cas, "key", string(e.Key),
			"collection", e.CollectionID, "value", "", "flags", 0, "expiry", 0, "collection_name", e.CollectionName}
		kv = append(kv, snapFields(e.Offset)...)
		c.ev.Emit("expiration", kv...)
		c.name(e.CollectionID, e.CollectionName)
		c.st.AddVersion(e.CollectionID, string(e.Key), harness.Version{Seqno: e.SeqNo, VB: e.VbID, Deleted: true,
			Rev: e.RevNo, Cas: e.Cas})
	default:
		harness.Logf(prog, "listener: unexpected event %T", e)
	}
}

// name records the collection of an event by its name (go-dcp streams one
// scope: its scopeName, _default unless configured).
func (c *consumer) name(id uint32, collection string) {
	if id == 0 || collection == "" {
		return
	}
	scope := c.opts.Scope
	if scope == "" {
		scope = "_default"
	}
	c.st.NameCollectionIn(id, scope, collection)
}

// TrackOffset is called by go-dcp whenever it moves a vbucket's checkpoint
// (after Ack, and for seqno-advanced / collection events).
func (c *consumer) TrackOffset(vb uint16, o *models.Offset) {
	if o == nil || c.stopping.Load() || !c.wanted(vb) {
		return
	}
	c.st.UpdateVB(vb, func(s *harness.VBState) {
		s.Seqno = o.SeqNo
		s.UUID = uint64(o.VbUUID)
		if o.SnapshotMarker != nil {
			s.SnapStart, s.SnapEnd = o.StartSeqNo, o.EndSeqNo
		}
	})
}

// ---------------------------------------------------------------- go-dcp log

// go-dcp tells only its log about rollbacks and stream ends; a logrus hook
// turns those lines into events (the formats are those of go-dcp v1.3.6).
var (
	reRollback  = regexp.MustCompile(`^open stream with rollback, vbID: (\d+), failedSeqNo: (\d+), rollbackSeqNo: (\d+)$`)
	reEndErr    = regexp.MustCompile(`^end stream vbID: (\d+) got error: (.*)$`)
	reEndOK     = regexp.MustCompile(`^end stream vbID: (\d+)$`)
	reReopened  = regexp.MustCompile(`^re-open stream, vbID: (\d+)$`)
	reReopenErr = regexp.MustCompile(`^cannot re-open stream, vbID: (\d+), err: (.*)$`)
)

type logHook struct {
	c       *consumer
	printAt logrus.Level
}

func (h *logHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h *logHook) Fire(e *logrus.Entry) error {
	c := h.c
	msg := e.Message
	if !c.stopping.Load() {
		if m := reRollback.FindStringSubmatch(msg); m != nil {
			vb := atou16(m[1])
			if c.wanted(vb) {
				c.ev.Emit("rollback", "vb", vb, "seqno", atou64(m[3]), "failed_seqno", atou64(m[2]))
			}
		} else if m := reEndErr.FindStringSubmatch(msg); m != nil {
			if vb := atou16(m[1]); c.wanted(vb) {
				c.ev.Emit("stream_end", "vb", vb, "reason", m[2])
			}
		} else if m := reEndOK.FindStringSubmatch(msg); m != nil {
			if vb := atou16(m[1]); c.wanted(vb) {
				c.ev.Emit("stream_end", "vb", vb, "reason", "ok")
			}
		} else if m := reReopened.FindStringSubmatch(msg); m != nil {
			if vb := atou16(m[1]); c.wanted(vb) {
				c.ev.Emit("stream_open", "vb", vb, "reopen", true)
			}
		} else if m := reReopenErr.FindStringSubmatch(msg); m != nil {
			if vb := atou16(m[1]); c.wanted(vb) {
				c.ev.Emit("error", "message", "go-dcp: "+msg, "vb", vb)
			}
		}
	}
	if e.Level <= h.printAt {
		harness.Logf(prog, "go-dcp %s: %s", strings.ToUpper(e.Level.String()), msg)
	}
	return nil
}

func (c *consumer) logrus() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard) // the hook prints
	l.SetLevel(logrus.DebugLevel)
	printAt := logrus.InfoLevel
	if c.opts.Verbose {
		printAt = logrus.DebugLevel
	}
	l.AddHook(&logHook{c: c, printAt: printAt})
	return l
}

// metadataFile is a new file for go-dcp's checkpoints (--outside-bucket),
// removed when the program stops.
func (c *consumer) metadataFile() string {
	f, err := os.CreateTemp("", "godcp-metadata-*.json")
	if err != nil {
		harness.Usage(prog, "--outside-bucket: %v", err)
	}
	_ = f.Close()
	_ = os.Remove(f.Name()) // go-dcp starts from "earliest" without one
	c.cleanup = append(c.cleanup, f.Name())
	return f.Name()
}

// freePort is a TCP port nothing listens on now (the kernel's pick).
// freePort picks a free port for go-dcp's API, which binds it later. The port is
// drawn below the kernel's ephemeral range (ip_local_port_range), where no bind to
// port 0 and no outgoing connection lands: picked by a bind to port 0, it was one
// mockdcp check's servers or the benches could be given between the pick and the
// API's bind (go's listeners set SO_REUSEADDR: the API could take even a port held
// bound for a server that had not listened yet). mockdcp.cli.bench._ports draws alike.
func freePort() int {
	first := 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				first = n
			}
		}
	}
	const floor = 20000
	if first-floor < 1000 {
		harness.Usage(prog, "the ephemeral range starts at %d: too few ports below it for go-dcp's API", first)
	}
	for range 100 {
		port := floor + rand.IntN(first-floor)
		if l, err := net.Listen("tcp", fmt.Sprintf(":%d", port)); err == nil {
			l.Close()
			return port
		}
	}
	harness.Usage(prog, "no free port for go-dcp's API among 100 drawn from %d-%d", floor, first-1)
	return 0
}

func atou16(s string) uint16 { n, _ := strconv.ParseUint(s, 10, 16); return uint16(n) }
func atou64(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
