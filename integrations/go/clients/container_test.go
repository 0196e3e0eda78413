package mockdcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/couchbase/gocbcore/v10"

	mockdcp "github.com/mockdcp/mockdcp/integrations/go"
)

// requireContainer skips the test unless a Docker engine answers with the image
// (MOCKDCP_IMAGE, else mockdcp:latest).
func requireContainer(t *testing.T) {
	t.Helper()
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		// Ryuk, testcontainers' reaper, is an image from a registry; these tests remove
		// their containers themselves (t.Cleanup)
		t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := mockdcp.ContainerAvailable(ctx, ""); err != nil {
		t.Skipf("container mode: %v", err)
	}
}

// gocbcoreLog records gocbcore's log lines while a test runs.
type gocbcoreLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *gocbcoreLog) Log(_ gocbcore.LogLevel, _ int, format string, v ...interface{}) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
	return nil
}

func (l *gocbcoreLog) has(text string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, text) {
			return true
		}
	}
	return false
}

func recordGocbcoreLog(t *testing.T) *gocbcoreLog {
	l := &gocbcoreLog{}
	gocbcore.SetLogger(l)
	t.Cleanup(func() { gocbcore.SetLogger(nil) })
	return l
}

// externalAddress is the alternateAddresses.external of the node in the HTTP
// cluster map.
type externalAddress struct {
	Hostname string         `json:"hostname"`
	Ports    map[string]int `json:"ports"`
}

func clusterMapExternal(t *testing.T, s *mockdcp.Server) externalAddress {
	t.Helper()
	req, _ := http.NewRequest("GET", s.HTTPURL()+"/pools/default/b/"+s.Bucket, nil)
	req.SetBasicAuth(s.Username, s.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cfg struct {
		NodesExt []struct {
			AlternateAddresses map[string]externalAddress `json:"alternateAddresses"`
		} `json:"nodesExt"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil || len(cfg.NodesExt) != 1 {
		t.Fatalf("the cluster map (%s): %v, %d nodes", resp.Status, err, len(cfg.NodesExt))
	}
	return cfg.NodesExt[0].AlternateAddresses["external"]
}

// The container's ports are published on host ports, which the server puts in its
// cluster map as the external address: gocbcore, seeded on the published address,
// takes the external network and streams the bucket; the control API (which asks a
// server off loopback for credentials) drives it.
func TestContainerStreamsOnThePublishedPorts(t *testing.T) {
	requireContainer(t)
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Container), mockdcp.WithVBuckets(16), mockdcp.WithDocs(200))
	if s.Mode != mockdcp.Container {
		t.Fatalf("mode %v", s.Mode)
	}
	t.Logf("container published at %s: kv %d, http %d", s.Host, s.KVPort, s.HTTPPort)
	ext := clusterMapExternal(t, s)
	if ext.Hostname != s.Host || ext.Ports["kv"] != s.KVPort || ext.Ports["mgmt"] != s.HTTPPort {
		t.Fatalf("external address %+v, want %s kv %d mgmt %d", ext, s.Host, s.KVPort, s.HTTPPort)
	}
	log := recordGocbcoreLog(t)
	c := streamAll(t, agentConfig(t, s, false))
	converge(t, c.docs, defaultCollection(t, s), c.failures)
	if !log.has("Using network type external") {
		t.Error("gocbcore did not take the external network")
	}
	s.Steps(t, mockdcp.Set("from::host", map[string]any{"ok": true}), mockdcp.Delete("user::000001"))
	converge(t, c.docs, defaultCollection(t, s), c.failures)
}

// WithTLS in a container: the TLS ports are published too, the CA comes from the
// container, and its node certificate names the Docker host.
func TestContainerOverTLS(t *testing.T) {
	requireContainer(t)
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Container), mockdcp.WithTLS(),
		mockdcp.WithVBuckets(8), mockdcp.WithDocs(50))
	ext := clusterMapExternal(t, s)
	if ext.Ports["kvSSL"] != s.KVTLSPort || ext.Ports["mgmtSSL"] != s.HTTPSPort {
		t.Fatalf("external TLS ports %+v, want kvSSL %d mgmtSSL %d", ext.Ports, s.KVTLSPort, s.HTTPSPort)
	}
	c := streamAll(t, agentConfig(t, s, true))
	converge(t, c.docs, defaultCollection(t, s), c.failures)
	https := mockdcp.NewClient(s.HTTPSURL(), s.Username, s.Password, tlsClient(s))
	if err := https.Health(context.Background()); err != nil {
		t.Fatalf("health over HTTPS: %v", err)
	}
}
