package mockdcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// The ports the image serves on, inside the container.
const (
	containerKV    = 11210
	containerHTTP  = 8091
	containerKVTLS = 11207
	containerHTTPS = 18091
)

// portAttempts is how many sets of host ports Container mode tries: each is chosen
// free a moment before Docker binds it, and another process may take one meanwhile.
const portAttempts = 5

// ContainerAvailable returns nil when a Docker engine answers (DOCKER_HOST, the
// testcontainers configuration) and has image locally ("": WithImage's default),
// else why not: what a test skips on.
func ContainerAvailable(ctx context.Context, image string) error {
	if image == "" {
		c, _ := newConfig([]Option{WithMode(Container)})
		image = c.image
	}
	provider, err := dockerProvider()
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("no Docker engine answers: %w", err)
	}
	if _, err := provider.Client().ImageInspect(ctx, image); err != nil {
		return fmt.Errorf("no image %s on the Docker engine (docker build -f docker/Dockerfile -t %s . in mockdcp's repository): %w",
			image, image, err)
	}
	return nil
}

// dockerProvider is testcontainers' Docker provider, or an error: testcontainers-go
// panics when it finds no Docker host at all.
func dockerProvider() (provider *testcontainers.DockerProvider, err error) {
	defer func() {
		if r := recover(); r != nil {
			provider, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return testcontainers.NewDockerProvider()
}

// startContainer runs the image with its ports published on host ports chosen
// here, and tells the server those ports (MOCKDCP_EXTERNAL_*, the image's `mockdcp
// serve` reads them): every cluster map then carries them as
// alternateAddresses.external, so that a client seeded on the published address
// keeps using it instead of the container's own. The server reads them when it
// starts, so they must be known before: Docker's random ports are only known after.
func startContainer(ctx context.Context, t testing.TB, c *config) (*Server, error) {
	provider, err := dockerProvider()
	if err != nil {
		return nil, fmt.Errorf("container mode: no Docker engine: %w", err)
	}
	host, err := provider.DaemonHost(ctx)
	provider.Close()
	if err != nil {
		return nil, fmt.Errorf("container mode: the Docker host: %w", err)
	}
	var lastErr error
	for range portAttempts {
		s, err := runContainer(ctx, t, c, host)
		if err == nil || !portTaken(err) {
			return s, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("container mode: no free host ports in %d attempts: %w", portAttempts, lastErr)
}

func runContainer(ctx context.Context, t testing.TB, c *config, host string) (*Server, error) {
	inside := []int{containerKV, containerHTTP}
	if c.tls {
		inside = append(inside, containerKVTLS, containerHTTPS)
	}
	outside, err := pickPorts(len(inside))
	if err != nil {
		return nil, err
	}
	published := map[int]int{}
	var exposed []string
	for i, port := range inside {
		published[port] = outside[i]
		exposed = append(exposed, fmt.Sprintf("%d:%d/tcp", outside[i], port))
	}
	env := map[string]string{
		"MOCKDCP_EXTERNAL_HOST":      host,
		"MOCKDCP_EXTERNAL_KV_PORT":   strconv.Itoa(published[containerKV]),
		"MOCKDCP_EXTERNAL_HTTP_PORT": strconv.Itoa(published[containerHTTP]),
	}
	args := c.serveArgs()
	var files []testcontainers.ContainerFile
	if c.scenario != "" {
		abs, err := filepath.Abs(c.scenario)
		if err != nil {
			return nil, err
		}
		inContainer := "/scenarios/" + filepath.Base(abs)
		files = append(files, testcontainers.ContainerFile{HostFilePath: abs, ContainerFilePath: inContainer, FileMode: 0o644})
		for i, a := range args {
			if a == "--scenario" {
				args[i+1] = inContainer
			}
		}
	}
	if c.tls {
		args = append(args, "--tls")
		env["MOCKDCP_EXTERNAL_KV_TLS_PORT"] = strconv.Itoa(published[containerKVTLS])
		env["MOCKDCP_EXTERNAL_HTTPS_PORT"] = strconv.Itoa(published[containerHTTPS])
	} else {
		// a node serves TLS by default (mockdcp serve too): without WithTLS, none (its
		// ports would not be published)
		args = append(args, "--no-tls")
	}
	var ready readyLine
	waitReady := wait.ForLog(`\{"event": ?"ready".*\}`).AsRegexp().
		Submatch(func(_ string, matches [][][]byte) error {
			if len(matches) == 0 {
				return errors.New("no ready line yet")
			}
			return json.Unmarshal(matches[0][0], &ready)
		}).
		WithStartupTimeout(time.Until(deadline(ctx)))
	req := testcontainers.ContainerRequest{
		Image:        c.image,
		Cmd:          args, // after the image's entrypoint, `mockdcp serve --host 0.0.0.0`
		Env:          env,
		ExposedPorts: exposed,
		Files:        files,
		// --json: the ready line, printed once the documents or the scenario are in
		WaitingFor: waitReady,
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req,
		Started:          true,
	})
	reported := false // the logs are in the error already
	if ctr != nil {
		t.Cleanup(func() {
			if t.Failed() && !reported {
				t.Logf("mockdcp container %s output:\n%s", ctr.GetContainerID(), containerLogs(ctr))
			}
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ctr.Terminate(stopCtx); err != nil {
				t.Errorf("mockdcp: remove the container: %v", err)
			}
		})
	}
	if err != nil {
		if ctr != nil && !portTaken(err) {
			reported = true
			return nil, fmt.Errorf("container mode: %s: %w\n%s", c.image, err, containerLogs(ctr))
		}
		return nil, fmt.Errorf("container mode: %s: %w", c.image, err)
	}
	user, password := credentials(c.args)
	return &Server{
		Host:      host,
		KVPort:    published[containerKV],
		HTTPPort:  published[containerHTTP],
		KVTLSPort: published[containerKVTLS],
		HTTPSPort: published[containerHTTPS],
		Bucket:    ready.Bucket, Username: user, Password: password,
	}, nil
}

// pickPorts chooses the host ports (a variable: a test makes it choose a taken one).
var pickPorts = freePorts

// freePorts returns n distinct ports no one is bound to now, drawn at random below
// the kernel's ephemeral range (ip_local_port_range). Docker binds them a moment
// later; a port picked by a bind to port 0 came from the ephemeral range, where any
// bind to port 0 and any outgoing connection of the machine could be given it
// meanwhile, and docker-proxy (it sets SO_REUSEADDR) could take one a server had bound
// and not yet listened on, leaving that server unable to listen.
func freePorts(n int) ([]int, error) {
	low, high, err := unclaimedRange()
	if err != nil {
		return nil, err
	}
	var ports []int
	chosen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("no %d free ports among %d drawn from %d-%d", n, tries, low, high-1)
		}
		port := low + rand.IntN(high-low)
		if chosen[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue
		}
		l.Close()
		chosen[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// unclaimedRange: the ports [low, high) freePorts draws from, from 20000 (above the
// registered ports services are configured with, Couchbase's among them) up to the
// ephemeral range, or above the ephemeral range where it starts lower.
func unclaimedRange() (int, int, error) {
	first, last := 32768, 60999 // Linux's default ephemeral range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			b, errB := strconv.Atoi(f[1])
			if errA == nil && errB == nil {
				first, last = a, b
			}
		}
	}
	const floor = 20000
	switch {
	case first-floor >= 1000:
		return floor, first, nil
	case 65535-last >= 1000:
		return last + 1, 65536, nil
	}
	return 0, 0, fmt.Errorf("the ephemeral range %d-%d leaves too few ports outside it", first, last)
}

// portTaken: Docker could not bind a host port (taken since it was chosen).
func portTaken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use")
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(2 * time.Minute)
}

func containerLogs(ctr testcontainers.Container) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := ctr.Logs(ctx)
	if err != nil {
		return "(no logs: " + err.Error() + ")"
	}
	defer r.Close()
	tail := &logTail{max: 64 << 10}
	if _, err := io.Copy(tail, r); err != nil {
		return tail.String() + "\n(" + err.Error() + ")"
	}
	return tail.String()
}
