package mockdcp_test

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

// godcpConsumer is a go-dcp listener keeping the live documents of the collections it
// streams: "scope.collection:key" -> value.
type godcpConsumer struct {
	mu   sync.Mutex
	docs map[string]string
}

func (g *godcpConsumer) listen(ctx *models.ListenerContext) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch e := ctx.Event.(type) {
	case models.DcpMutation:
		g.docs[e.CollectionName+":"+string(e.Key)] = string(e.Value)
	case models.DcpDeletion:
		delete(g.docs, e.CollectionName+":"+string(e.Key))
	case models.DcpExpiration:
		delete(g.docs, e.CollectionName+":"+string(e.Key))
	}
	ctx.Ack()
}

func (g *godcpConsumer) held() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.docs)
}

// go-dcp bootstraps over HTTP (HTTPURL), streams one collection of a bucket made with
// WithArgs("--collections", ...), and holds that collection's oracle, before and
// after steps write to it and to another collection.
func TestGoDCPStreamsACollection(t *testing.T) {
	s := mockdcp.Start(t, mockdcp.WithMode(mockdcp.Local), mockdcp.WithVBuckets(16),
		mockdcp.WithArgs("--collections", "inventory.hotel,inventory.air"))
	hotel := func(key string, value any) mockdcp.Step {
		return mockdcp.Set(key, value).With("collection", "inventory.hotel")
	}
	s.Steps(t, mockdcp.Generate(100).With("collection", "inventory.hotel"),
		mockdcp.Generate(30).With("collection", "inventory.air"))

	g := &godcpConsumer{docs: map[string]string{}}
	connector, err := dcp.NewDcp(&config.Dcp{
		Hosts:           []string{s.HTTPURL()},
		Username:        s.Username,
		Password:        s.Password,
		BucketName:      s.Bucket,
		ScopeName:       "inventory",
		CollectionNames: []string{"hotel"},
		Dcp: config.ExternalDcp{Group: config.DCPGroup{
			Name:       "godcp-test",
			Membership: config.DCPGroupMembership{Type: "static", MemberNumber: 1, TotalMembers: 1},
		}},
		Metadata:           config.Metadata{Type: config.MetadataTypeNoop},
		API:                config.API{Disabled: true},
		HealthCheck:        config.HealthCheck{Disabled: true},
		RollbackMitigation: config.RollbackMitigation{Disabled: true},
		Logging:            config.Logging{Level: "error"},
	}, g.listen)
	if err != nil {
		t.Fatal(err)
	}
	go connector.Start()
	t.Cleanup(connector.Close)
	select {
	case <-connector.WaitUntilReady():
	case <-time.After(30 * time.Second):
		t.Fatal("go-dcp not ready within 30 s")
	}

	want := func() map[string]string {
		out := map[string]string{}
		for _, d := range s.Oracle(t) {
			if d.Scope == "inventory" && d.Collection == "hotel" {
				out["hotel:"+d.Key] = string(d.Body())
			}
		}
		return out
	}
	converge(t, g.held, want, nil)
	s.Steps(t,
		hotel("hotel::ritz", map[string]any{"stars": 5}),
		mockdcp.Delete("doc::000004").With("collection", "inventory.hotel"),
		mockdcp.Set("air::1", "elsewhere").With("collection", "inventory.air"),
	)
	converge(t, g.held, want, nil)
	if len(want()) != 100 {
		t.Errorf("the hotel collection holds %d documents, want 100", len(want()))
	}
}
