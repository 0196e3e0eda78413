package mockdcp

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// A host port taken between its choice and Docker's bind: Start tries other ports.
func TestContainerRetriesATakenPort(t *testing.T) {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true") // the reaper's image needs a registry
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := ContainerAvailable(ctx, ""); err != nil {
		t.Skipf("container mode: %v", err)
	}
	taken, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 {
			ports[0] = taken.Addr().(*net.TCPAddr).Port
		}
		return ports, err
	}
	t.Cleanup(func() { pickPorts = freePorts })
	s := Start(t, WithMode(Container), WithVBuckets(4))
	if calls != 2 || s.KVPort == taken.Addr().(*net.TCPAddr).Port {
		t.Fatalf("%d port choices, KV port %d", calls, s.KVPort)
	}
	if err := s.Control().Health(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPortTaken(t *testing.T) {
	for msg, want := range map[string]bool{
		"Error starting userland proxy: listen tcp4 0.0.0.0:46997: bind: address already in use": true,
		"Bind for 0.0.0.0:32768 failed: port is already allocated":                               true,
		"No such image: mockdcp:latest":                                                          false,
	} {
		if got := portTaken(errString(msg)); got != want {
			t.Errorf("portTaken(%q) = %v", msg, got)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// Host ports are drawn free, distinct and outside the ephemeral range, where no bind
// to port 0 nor outgoing connection of the machine lands between the choice and
// Docker's bind.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	low, high, err := unclaimedRange()
	if err != nil {
		t.Fatal(err)
	}
	ports, err := freePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range ports {
		if port < low || port >= high || seen[port] {
			t.Fatalf("ports %v: want distinct ports in [%d, %d)", ports, low, high)
		}
		seen[port] = true
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		l.Close()
	}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if port := probe.Addr().(*net.TCPAddr).Port; port >= low && port < high {
		t.Fatalf("a bind to port 0 got %d, inside [%d, %d)", port, low, high)
	}
}
