package mockdcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The client's route table against a live server's OpenAPI document: every route,
// method, status, content type and response field the client uses is there.
func TestControlRoutesAreInTheOpenAPIDocument(t *testing.T) {
	s := Start(t, WithMode(Local), WithVBuckets(4))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	doc, err := s.Control().openAPI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := openAPI{doc}
	for name, r := range routes.Routes {
		op := api.get("paths", r.Path, strings.ToLower(r.Method))
		if op == nil {
			t.Errorf("%s: %s %s is not in the OpenAPI document", name, r.Method, r.Path)
			continue
		}
		if r.Request != "" && api.at(op, "requestBody", "content", r.Request) == nil {
			t.Errorf("%s: %s %s takes no %s body", name, r.Method, r.Path, r.Request)
		}
		media := api.at(op, "responses", strconv.Itoa(r.Status), "content", r.Response)
		if media == nil {
			t.Errorf("%s: %s %s has no %d %s answer", name, r.Method, r.Path, r.Status, r.Response)
			continue
		}
		schema := api.at(media, "schema")
		for _, field := range r.Fields {
			if !api.hasField(schema, field) {
				t.Errorf("%s: the %d answer of %s %s has no field %s", name, r.Status, r.Method, r.Path, field)
			}
		}
	}
	names := api.get("paths", routeNamed("steps").Path, "post", "requestBody", "content", "application/json",
		"schema", "items", "propertyNames", "enum")
	for _, step := range routes.Steps {
		if !slices.Contains(asSlice(names), any(step)) {
			t.Errorf("POST /mock/steps does not know the step %q", step)
		}
	}
	problem := api.get("components", "schemas", "Problem")
	for _, field := range routes.Problem {
		if !api.hasField(problem, field) {
			t.Errorf("the Problem schema has no field %s", field)
		}
	}
}

// The client's types decode exactly the fields control-routes.json lists.
func TestClientTypesDecodeTheListedFields(t *testing.T) {
	types := map[string]any{
		"health": Health{}, "state": State{}, "oracle": oracleRows{}, "expectations": Expectations{},
		"steps": StepsResult{}, "scenario": ScenarioRun{},
	}
	for name, r := range routes.Routes {
		v, ok := types[name]
		if !ok {
			if len(r.Fields) > 0 {
				t.Errorf("%s: fields listed, no type decodes them", name)
			}
			continue
		}
		compareFields(t, name, jsonFields(reflect.TypeOf(v), ""), r.Fields)
	}
	compareFields(t, "problem", jsonFields(reflect.TypeOf(Problem{}), ""), routes.Problem)
}

func compareFields(t *testing.T, name string, decoded, listed []string) {
	t.Helper()
	for _, f := range decoded {
		if !slices.Contains(listed, f) {
			t.Errorf("%s: the client decodes %s, which control-routes.json does not list", name, f)
		}
	}
	for _, f := range listed {
		if !slices.Contains(decoded, f) {
			t.Errorf("%s: control-routes.json lists %s, which the client does not decode", name, f)
		}
	}
}

// The typed step constructors build exactly the steps control-routes.json lists,
// with fields the scenario schema (mockdcp/scenario/scenario.schema.json, when this
// module is inside mockdcp's repository) allows.
func TestStepConstructors(t *testing.T) {
	built := []Step{
		Set("k", "v").With("collection", "s.c"), Delete("k"), Expire("k"), Generate(3).With("prefix", "p").With("start", 3),
		Checkpoint(1), Persist(1, 2).With("upto", 3), Persistence(true), Purge(), DropCursor(), Restart(),
		Failover(0), MoveVbucket(2), Flush(), CreateScope("s"), CreateCollection("s.c"), DropCollection("s.c"),
		DropScope("s"), CreateBucket("b").With("flush_enabled", true), Set("k", "v").With("bucket", "b"),
		DeleteBucket("b"),
		Disconnect().With("connection", "x"), EndStream("closed", 1), Wait(time.Second),
		WaitFor(ConsumerProgress{VBuckets: []int{1, 2}, Seqno: High, Acked: true, Connections: 1, Streams: true,
			BytesAcked: 1, Rollback: true, Connection: "x"}, time.Second),
		ExpectRollback(1).With("within", 2), ExpectReconnected(), Label("l"),
		CreateUser("u", "secret", "admin").With("full_name", "U"), DeleteUser("u"), Grant("u", "admin"),
		Revoke("u", "admin"), ChangePassword("u", "secret2"),
	}
	var names []string
	for _, s := range built {
		if !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	if want := slices.Sorted(slices.Values(routes.Steps)); !slices.Equal(names, want) {
		t.Errorf("constructors build %v, control-routes.json lists %v", names, want)
	}

	data, err := os.ReadFile(filepath.Join("..", "..", "mockdcp", "scenario", "scenario.schema.json"))
	if err != nil {
		t.Skipf("no scenario schema beside this module: %v", err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	api := openAPI{schema}
	variants := asSlice(api.get("properties", "steps", "items", "oneOf"))
	for _, s := range built {
		var stepSchema any
		for _, v := range variants {
			if p := api.at(v, "properties", s.Name); p != nil {
				stepSchema = p
			}
		}
		if stepSchema == nil {
			t.Errorf("the scenario schema has no step %q", s.Name)
			continue
		}
		var fields map[string]any
		b, _ := json.Marshal(s.Fields)
		_ = json.Unmarshal(b, &fields)
		for _, path := range leafPaths(fields, "") {
			if !api.hasField(stepSchema, path) {
				t.Errorf("%s: the scenario schema has no field %s", s, path)
			}
		}
	}
}

// -- an OpenAPI / JSON Schema document, walked as decoded JSON

type openAPI struct{ doc map[string]any }

func (a openAPI) get(path ...string) any { return a.at(a.doc, path...) }

// at follows path from node, through $ref.
func (a openAPI) at(node any, path ...string) any {
	for _, key := range path {
		m, ok := a.deref(node).(map[string]any)
		if !ok {
			return nil
		}
		if node, ok = m[key]; !ok {
			return nil
		}
	}
	return a.deref(node)
}

func (a openAPI) deref(node any) any {
	for range 10 {
		m, ok := node.(map[string]any)
		if !ok {
			return node
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return node
		}
		node = a.doc
		for _, key := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			node = node.(map[string]any)[key]
		}
	}
	return node
}

// hasField: schema describes field ("a.b": property b of property a; "a[].b":
// property b of the items of a), through oneOf/anyOf/allOf branches.
func (a openAPI) hasField(schema any, field string) bool {
	head, rest, nested := strings.Cut(field, ".")
	name, isArray := strings.CutSuffix(head, "[]")
	for _, s := range a.branches(schema) {
		prop := a.at(s, "properties", name)
		if prop == nil {
			continue
		}
		if isArray {
			prop = a.items(prop)
			if prop == nil {
				continue
			}
		}
		if !nested || a.hasField(prop, rest) {
			return true
		}
	}
	return false
}

// branches are schema and the schemas of its oneOf/anyOf/allOf, recursively.
func (a openAPI) branches(schema any) []any {
	out := []any{a.deref(schema)}
	for _, key := range []string{"oneOf", "anyOf", "allOf"} {
		for _, b := range asSlice(a.at(schema, key)) {
			out = append(out, a.branches(b)...)
		}
	}
	return out
}

func (a openAPI) items(schema any) any {
	for _, s := range a.branches(schema) {
		if it := a.at(s, "items"); it != nil {
			return it
		}
	}
	return nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// jsonFields lists the JSON paths a type decodes, as control-routes.json writes
// them.
func jsonFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, jsonFields(ft, prefix+name+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, jsonFields(ft.Elem(), prefix+name+"[].")...)
		default:
			out = append(out, prefix+name)
		}
	}
	return out
}

// leafPaths lists the paths of a step's fields: objects are followed, anything
// else is a leaf.
func leafPaths(m map[string]any, prefix string) []string {
	var out []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, leafPaths(sub, prefix+k+".")...)
		} else {
			out = append(out, prefix+k)
		}
	}
	return out
}
