package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/steadystate/steadystate"

// corePackages are the patterns of the packages that must stay free of
// glue.
var corePackages = []string{
	module + "/index/...",
	module + "/internal/...",
	module + "/statedb",
	module + "/reconciler",
	module + "/reflector",
}

// forbidden are the import paths (and, ending in "/", path prefixes) that
// no core package may depend on, directly or not.
var forbidden = []string{
	module + "/hive", module + "/hive/",
	"go.uber.org/dig", "go.uber.org/dig/",
	"github.com/spf13/cobra", "github.com/spf13/cobra/",
	"github.com/spf13/pflag",
	"github.com/prometheus/",
	"google.golang.org/protobuf/",
	"google.golang.org/grpc", "google.golang.org/grpc/",
	"go.etcd.io/etcd/",
	"github.com/fsnotify/fsnotify",
}

func isForbidden(path string) bool {
	for _, f := range forbidden {
		if path == f || strings.HasSuffix(f, "/") && strings.HasPrefix(path, f) {
			return true
		}
	}
	return false
}

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath string
	Imports    []string
	DepOnly    bool
}

// list runs `go list -deps -json` on patterns and returns the packages
// matched (roots) and every package by import path.
func list(t *testing.T, patterns ...string) (roots []string, all map[string]pkg) {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	cmd := exec.Command(goTool, append([]string{"list", "-deps", "-json=ImportPath,Imports,DepOnly"}, patterns...)...)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list %v: %v\n%s", patterns, err, exit.Stderr)
		}
		t.Fatalf("go list %v: %v", patterns, err)
	}
	all = map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		all[p.ImportPath] = p
		if !p.DepOnly {
			roots = append(roots, p.ImportPath)
		}
	}
	slices.Sort(roots)
	return roots, all
}

// violations returns, for each root that depends on a forbidden package,
// the shortest import chain from the root to one.
func violations(roots []string, all map[string]pkg) []string {
	var out []string
	for _, root := range roots {
		// Breadth first, so the chain shown is a shortest one.
		from := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if isForbidden(p) {
				chain := []string{p}
				for q := from[p]; q != ""; q = from[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				out = append(out, strings.Join(chain, " -> "))
				break
			}
			for _, imp := range all[p].Imports {
				if _, seen := from[imp]; !seen {
					from[imp] = p
					queue = append(queue, imp)
				}
			}
		}
	}
	return out
}

// The cores import no glue: neither hive, dig, cobra, pflag nor Prometheus
// (nor protobuf, which Prometheus brings).
func TestCoreImportsNoGlue(t *testing.T) {
	roots, all := list(t, corePackages...)
	for _, want := range []string{module + "/index", module + "/internal/radix", module + "/statedb", module + "/reconciler", module + "/reflector"} {
		if !slices.Contains(roots, want) {
			t.Fatalf("go list %v did not list %s (listed %v)", corePackages, want, roots)
		}
	}
	for _, v := range violations(roots, all) {
		t.Errorf("a core package depends on glue: %s", v)
	}
}

// The check finds what it looks for: the glue packages do depend on hive
// and Prometheus.
func TestGuardSeesGlue(t *testing.T) {
	glue := []string{module + "/statedb/statedbcell", module + "/reconciler/reconcilercell"}
	roots, all := list(t, glue...)
	if got := violations(roots, all); len(got) != len(glue) {
		t.Fatalf("violations of %v: %v, want one for each", glue, got)
	}
}
