package mcp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/bindings/mcp"
)

// TestProtectedResourceMetadataLocations: the RFC 9728 document is served
// at the root and at the location §3.1 derives for the resource /mcp
// (what MCP clients probe first), both naming the resource the client
// reached; the path-suffixed location of another path is not served.
func TestProtectedResourceMetadataLocations(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(nil, nil, nil)
	hs := httptest.NewServer(mcp.AgentsHandler(map[string]*sdk.Server{"agent-token": srv}, "admin-token"))
	defer hs.Close()
	for _, path := range []string{mcp.ProtectedResourcePath, mcp.ProtectedResourcePath + "/mcp"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resource      string   `json:"resource"`
			BearerMethods []string `json:"bearer_methods_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %v", path, resp.Status, err)
		}
		if doc.Resource != hs.URL+"/mcp" || len(doc.BearerMethods) != 1 || doc.BearerMethods[0] != "header" {
			t.Fatalf("%s: %+v", path, doc)
		}
	}
	resp, err := http.Get(hs.URL + mcp.ProtectedResourcePath + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the document for another path: %s", resp.Status)
	}
}
