package leaf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The client against docs/openapi.json: every path it calls exists there with that method, and
// the error codes are the same set both ways.

func openAPI(t *testing.T) map[string]interface{} {
	data, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]interface{}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestEveryRouteTheClientCallsIsInOpenAPI(t *testing.T) {
	paths, _ := openAPI(t)["paths"].(map[string]interface{})
	if len(paths) == 0 {
		t.Fatal("no paths in openapi.json")
	}
	for _, r := range Routes() {
		ops, ok := paths[r.Template].(map[string]interface{})
		if !ok {
			t.Errorf("%s %s is not in openapi.json", r.Method, r.Template)
			continue
		}
		if _, ok := ops[strings.ToLower(r.Method)]; !ok {
			t.Errorf("%s %s: openapi.json has no %s", r.Method, r.Template, r.Method)
		}
	}
	// No path is written into a request outside routes.go.
	files, _ := filepath.Glob("*.go")
	literal := regexp.MustCompile(`"/(api|admin|health)[^"]*"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "routes.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := literal.FindAllString(string(src), -1); len(m) > 0 {
			t.Errorf("%s writes paths outside routes.go: %v", f, m)
		}
	}
}

func TestErrorCodesEqualTheOpenAPIEnumBothWays(t *testing.T) {
	schemas := openAPI(t)["components"].(map[string]interface{})["schemas"].(map[string]interface{})
	enum := schemas["ErrorCode"].(map[string]interface{})["enum"].([]interface{})
	documented := map[ErrorCode]bool{}
	for _, c := range enum {
		documented[ErrorCode(c.(string))] = true
	}
	ours := map[ErrorCode]bool{}
	for _, c := range ErrorCodes() {
		ours[c] = true
	}
	var missing, extra []string
	for c := range documented {
		if !ours[c] {
			missing = append(missing, string(c))
		}
	}
	for c := range ours {
		if !documented[c] {
			extra = append(extra, string(c))
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("codes of the API missing from the client: %v; codes the API does not have: %v", missing, extra)
	}
	if len(documented) < 30 {
		t.Errorf("only %d codes read from openapi.json", len(documented))
	}
	// Every constant of codes.go is in the list (none declared but unknown).
	src, err := os.ReadFile("codes.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`ErrorCode = "([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		if !documented[ErrorCode(m[1])] || !ErrorCode(m[1]).Known() {
			t.Errorf("constant %q is not an API code", m[1])
		}
	}
	if ErrorCode("a_code_from_the_future").Known() {
		t.Error("an unknown code is known")
	}
}
