package mockdcp_test

import (
	"testing"

	mockdcp "github.com/mockdcp/mockdcp/integrations/go"
)

// oracleDocs is the oracle's default collection as key -> value (the module of the
// real-client tests, clients/, has the same helper).
func oracleDocs(t testing.TB, s *mockdcp.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range s.Oracle(t) {
		if d.Scope == "_default" && d.Collection == "_default" {
			out[d.Key] = string(d.Body())
		}
	}
	return out
}
