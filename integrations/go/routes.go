package mockdcp

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// controlRoutesJSON is every route, method and response field of the control API
// that this package uses: the one place they are written down. The client reads its
// methods and paths from it, and the contract test checks it against a live server's
// /mock/openapi.json.
//
//go:embed control-routes.json
var controlRoutesJSON []byte

// route is one entry of control-routes.json.
type route struct {
	Method   string   `json:"method"`
	Path     string   `json:"path"`
	Status   int      `json:"status"`
	Request  string   `json:"request,omitempty"`
	Response string   `json:"response"`
	Fields   []string `json:"fields,omitempty"`
}

type routeTable struct {
	Routes  map[string]route `json:"routes"`
	Problem []string         `json:"problem"`
	Steps   []string         `json:"steps"`
}

var routes = mustParseRoutes(controlRoutesJSON)

func mustParseRoutes(data []byte) routeTable {
	var t routeTable
	if err := json.Unmarshal(data, &t); err != nil {
		panic(fmt.Sprintf("mockdcp: control-routes.json: %v", err))
	}
	return t
}

// routeNamed returns the route; a name missing from control-routes.json is a bug of
// this package.
func routeNamed(name string) route {
	r, ok := routes.Routes[name]
	if !ok {
		panic("mockdcp: no route " + name + " in control-routes.json")
	}
	return r
}
