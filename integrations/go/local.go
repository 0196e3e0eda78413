package mockdcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyLine is the line `mockdcp serve --json` prints once it serves.
type readyLine struct {
	Event     string `json:"event"`
	Host      string `json:"host"`
	KVPort    int    `json:"kv_port"`
	HTTPPort  int    `json:"http_port"`
	TLSPort   int    `json:"tls_port"`
	HTTPSPort int    `json:"https_port"`
	Bucket    string `json:"bucket"`
}

// logTail keeps the last max bytes written to it: the server's output, shown when
// it fails to start or the test fails.
type logTail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - l.max; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.buf))
}

// readyWriter takes the server's standard output: the first line that is a ready
// event is sent on ready; every byte also goes to the log.
type readyWriter struct {
	log   *logTail
	ready chan<- readyLine
	line  []byte
	sent  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	_, _ = w.log.Write(p)
	if w.sent {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for !w.sent {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		var r readyLine
		if json.Unmarshal(w.line[:i], &r) == nil && r.Event == "ready" {
			w.ready <- r
			w.sent = true
		}
		w.line = w.line[i+1:]
	}
	if w.sent {
		w.line = nil
	}
	return len(p), nil
}

// startLocal runs `mockdcp serve` with free ports and waits for its ready line.
func startLocal(ctx context.Context, t testing.TB, c *config) (*Server, error) {
	bin, err := exec.LookPath("mockdcp")
	if err != nil {
		return nil, fmt.Errorf("local mode needs the mockdcp command on PATH (pip install mockdcp): %w", err)
	}
	args := []string{"serve", "--host", "127.0.0.1", "--port", "0", "--http-port", "0"}
	if c.tls {
		args = append(args, "--tls", "--tls-port", "0", "--https-port", "0")
	} else {
		// a node serves TLS by default (mockdcp serve too): without WithTLS, none
		args = append(args, "--no-tls")
	}
	args = append(args, c.serveArgs()...)

	log := &logTail{max: 64 << 10}
	ready := make(chan readyLine, 1)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = &readyWriter{log: log, ready: ready}
	cmd.Stderr = log
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	cmd.WaitDelay = 5 * time.Second // a child holding the pipes open does not hold Wait
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped, reported := false, false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if cmd.Process.Signal(syscall.SIGTERM) != nil { // mockdcp serve stops at once on SIGTERM
			_ = cmd.Process.Kill()
		}
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	t.Cleanup(func() {
		if t.Failed() && !reported {
			t.Logf("mockdcp serve (pid %d) output:\n%s", cmd.Process.Pid, log)
		}
		stop()
	})

	select {
	case r := <-ready:
		user, password := credentials(c.args)
		return &Server{
			Host: r.Host, KVPort: r.KVPort, HTTPPort: r.HTTPPort,
			KVTLSPort: r.TLSPort, HTTPSPort: r.HTTPSPort,
			Bucket: r.Bucket, Username: user, Password: password,
		}, nil
	case err := <-exited:
		stopped, reported = true, true
		return nil, fmt.Errorf("%s %s exited before it was ready (%v):\n%s",
			bin, strings.Join(args, " "), err, log)
	case <-ctx.Done():
		stop()
		reported = true
		return nil, fmt.Errorf("mockdcp serve was not ready within the start timeout (%w):\n%s",
			context.Cause(ctx), log)
	}
}

// credentials are the bucket user's, from serve's --user and --password when args
// give them.
func credentials(args []string) (user, password string) {
	user, password = "Administrator", "password"
	for i, a := range args {
		name, value, inline := strings.Cut(a, "=")
		if !inline {
			if i+1 >= len(args) {
				break
			}
			value = args[i+1]
		}
		switch name {
		case "--user":
			user = value
		case "--password":
			password = value
		}
	}
	return user, password
}
