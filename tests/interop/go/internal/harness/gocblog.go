package harness

import (
	"fmt"
	"strings"
	"sync"

	"github.com/couchbase/gocbcore/v10"
)

type gocbLogger struct {
	prog  string
	level gocbcore.LogLevel
}

func (l *gocbLogger) Log(level gocbcore.LogLevel, _ int, format string, v ...interface{}) error {
	if level <= gocbcore.LogWarn {
		msg := fmt.Sprintf(format, v...)
		if strings.Contains(msg, "failed to bootstrap") || strings.Contains(msg, "Failed to connect") {
			lastBootstrapMu.Lock()
			lastBootstrapErr = msg
			lastBootstrapMu.Unlock()
		}
	}
	if level > l.level {
		return nil
	}
	Logf(l.prog, "gocbcore %s: %s", levelName(level), fmt.Sprintf(format, v...))
	return nil
}

func levelName(l gocbcore.LogLevel) string {
	switch l {
	case gocbcore.LogError:
		return "ERROR"
	case gocbcore.LogWarn:
		return "WARN"
	case gocbcore.LogInfo:
		return "INFO"
	case gocbcore.LogDebug:
		return "DEBUG"
	default:
		return "TRACE"
	}
}

// SetGocbcoreLogger routes gocbcore's log to stderr: info and above, or
// debug and above with verbose.
func SetGocbcoreLogger(prog string, verbose bool) {
	level := gocbcore.LogInfo
	if verbose {
		level = gocbcore.LogDebug
	}
	gocbcore.SetLogger(&gocbLogger{prog: prog, level: level})
}

var (
	lastBootstrapMu  sync.Mutex
	lastBootstrapErr string
)

// LastBootstrapWarning returns gocbcore's last "failed to bootstrap" /
// "Failed to connect" warning ("" if none), to explain a WaitUntilReady
// timeout.
func LastBootstrapWarning() string {
	lastBootstrapMu.Lock()
	defer lastBootstrapMu.Unlock()
	return lastBootstrapErr
}
