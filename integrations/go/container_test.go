package mockdcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// WithScenario copies the file into the container.
func TestContainerScenario(t *testing.T) {
	requireContainer(t)
	file := filepath.Join(t.TempDir(), "orders.yaml")
	scenario := "name: orders\nbucket: {name: orders, vbuckets: 4}\nsteps:\n  - generate: {docs: 7}\n"
	if err := os.WriteFile(file, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Container), mockdcp.WithScenario(file))
	if s.Bucket != "orders" {
		t.Errorf("bucket %q, want the scenario's", s.Bucket)
	}
	if docs := s.Oracle(t); len(docs) != 7 {
		t.Errorf("oracle: %d documents, want 7", len(docs))
	}
}

// Auto runs a container when no mockdcp command is on PATH.
func TestAutoRunsAContainerWithoutTheCommand(t *testing.T) {
	requireContainer(t)
	t.Setenv("PATH", t.TempDir())
	if s := mockdcp.Start(t, mockdcp.WithVBuckets(4)); s.Mode != mockdcp.Container {
		t.Fatalf("mode %v, want container", s.Mode)
	}
}

// A container that exits before it is ready fails the test with its output.
func TestContainerFailsWithTheServersMessage(t *testing.T) {
	requireContainer(t)
	msg := startFailing(t, mockdcp.WithMode(mockdcp.Container), mockdcp.WithArgs("--no-such-option"))
	if !strings.Contains(msg, "unrecognized arguments: --no-such-option") {
		t.Fatalf("failure %q does not carry the server's message", msg)
	}
}
