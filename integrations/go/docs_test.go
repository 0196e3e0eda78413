package mockdcp_test

import (
	"os"
	"strings"
	"testing"
)

// The documentation (docs/go.md) shows clients/example/consumer_test.go, which go test runs
// there, as it is.
func TestReadmesShowTheExample(t *testing.T) {
	example, err := os.ReadFile("clients/example/consumer_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, readme := range []string{"../../docs/go.md"} {
		text, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "```go\n"+string(example)+"```\n") {
			t.Errorf("%s does not show clients/example/consumer_test.go as it is", readme)
		}
	}
}
