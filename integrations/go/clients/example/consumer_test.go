package consumer_test

import (
	"maps"
	"sync"
	"testing"
	"time"

	dcp "github.com/Trendyol/go-dcp"
	"github.com/Trendyol/go-dcp/config"
	"github.com/Trendyol/go-dcp/models"

	mockdcp "github.com/mockdcp/mockdcp/integrations/go"
)

// A go-dcp consumer streams a mock bucket; the test changes the bucket with steps
// and checks that the consumer holds what the oracle says it must.
func TestConsumerFollowsTheBucket(t *testing.T) {
	srv := mockdcp.Start(t, mockdcp.WithVBuckets(16), mockdcp.WithDocs(100))

	// the consumer under test: here, a go-dcp listener keeping key -> value
	var mu sync.Mutex
	held := map[string]string{}
	listener := func(ctx *models.ListenerContext) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ctx.Event.(type) {
		case models.DcpMutation:
			held[string(e.Key)] = string(e.Value)
		case models.DcpDeletion:
			delete(held, string(e.Key))
		case models.DcpExpiration:
			delete(held, string(e.Key))
		}
		ctx.Ack()
	}
	connector, err := dcp.NewDcp(&config.Dcp{
		Hosts:      []string{srv.HTTPURL()},
		Username:   srv.Username,
		Password:   srv.Password,
		BucketName: srv.Bucket,
		Dcp: config.ExternalDcp{Group: config.DCPGroup{
			Name:       "my-consumer",
			Membership: config.DCPGroupMembership{Type: "static", MemberNumber: 1, TotalMembers: 1},
		}},
		Metadata:    config.Metadata{Type: config.MetadataTypeNoop},
		API:         config.API{Disabled: true},
		HealthCheck: config.HealthCheck{Disabled: true},
		Logging:     config.Logging{Level: "error"},
	}, listener)
	if err != nil {
		t.Fatal(err)
	}
	go connector.Start()
	t.Cleanup(connector.Close)
	<-connector.WaitUntilReady()

	holdsTheOracle := func() {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			want := map[string]string{}
			for _, doc := range srv.Oracle(t) {
				want[doc.Key] = string(doc.Body())
			}
			mu.Lock()
			got := maps.Clone(held)
			mu.Unlock()
			if maps.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the consumer holds %d documents, the oracle %d", len(got), len(want))
			}
		}
	}
	holdsTheOracle()

	srv.Steps(t,
		mockdcp.Set("user::ada", map[string]any{"name": "Ada"}),
		mockdcp.Delete("user::000003"),
		mockdcp.Generate(20).With("prefix", "order"),
		mockdcp.Disconnect(), // the consumer must reconnect and resume
		mockdcp.Set("user::bob", map[string]any{"name": "Bob"}),
	)
	holdsTheOracle()
}
