package mockdcp_test

import (
	"os"
	"strings"
	"testing"
)

// The documentation (docs/go.md) shows example/consumer_test.go, which go test runs, as it is.
func TestReadmesShowTheExample(t *testing.T) {
	example, err := os.ReadFile("example/consumer_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, readme := range []string{"../../docs/go.md"} {
		text, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "```go\n"+string(example)+"```\n") {
			t.Errorf("%s does not show example/consumer_test.go as it is", readme)
		}
	}
}
