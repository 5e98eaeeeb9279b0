// Command kstatus judges Kubernetes objects as the GitOps tools do, with their own code: kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status, what Flux's health checks and `kubectl wait`-style
// tools use) and Argo CD's Lua health scripts run in gopher-lua (the interpreter Argo CD embeds),
// with the libraries Argo CD opens for them (package, base, table: no string, no io, no os).
//
// It reads JSON on stdin — one object, a List (`kubectl get -o json`) or an array — and writes one
// JSON line per object:
//
//	{"kind":"Proxy","namespace":"ns","name":"p","kstatus":{"status":"Current","message":"…"},
//	 "argocd":{"status":"Healthy","message":"…"}}
//
// `argocd` is present when -health names a directory holding <group>/<Kind>/health.lua for the
// object's kind (Argo CD's resource_customizations layout); a script that fails, or returns a
// status Argo CD does not know, is an error (exit 1).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type line struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	Kstatus   verdict  `json:"kstatus"`
	Argocd    *verdict `json:"argocd,omitempty"`
}

// The health statuses Argo CD accepts from a script (gitops-engine health.HealthStatusCode).
var argoStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

func main() {
	healthDir := flag.String("health", "", "directory of Argo CD health scripts: <group>/<Kind>/health.lua")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *healthDir); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, healthDir string) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	// As the API machinery decodes objects (whole numbers become int64), which kstatus expects.
	var doc any
	if err := kjson.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("reading JSON: %w", err)
	}
	objects, err := objectsOf(doc)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	for _, obj := range objects {
		u := &unstructured.Unstructured{Object: obj}
		res, err := status.Compute(u)
		if err != nil {
			return fmt.Errorf("%s %s: kstatus: %w", u.GetKind(), u.GetName(), err)
		}
		l := line{
			Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(),
			Kstatus: verdict{Status: res.Status.String(), Message: res.Message},
		}
		if healthDir != "" {
			group := strings.SplitN(u.GetAPIVersion(), "/", 2)[0]
			if !strings.Contains(u.GetAPIVersion(), "/") {
				group = ""
			}
			script, err := os.ReadFile(filepath.Join(healthDir, group, u.GetKind(), "health.lua"))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if err == nil {
				v, err := argoHealth(string(script), obj)
				if err != nil {
					return fmt.Errorf("%s %s: health.lua: %w", u.GetKind(), u.GetName(), err)
				}
				l.Argocd = v
			}
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}

func objectsOf(doc any) ([]map[string]any, error) {
	var items []any
	switch d := doc.(type) {
	case []any:
		items = d
	case map[string]any:
		if list, ok := d["items"].([]any); ok && strings.HasSuffix(fmt.Sprint(d["kind"]), "List") {
			items = list
		} else {
			items = []any{d}
		}
	default:
		return nil, errors.New("expected an object, a List or an array")
	}
	objects := make([]map[string]any, 0, len(items))
	for i, item := range items {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("item %d is not an object", i)
		}
		objects = append(objects, obj)
	}
	return objects, nil
}

// argoHealth runs a health script as Argo CD does (argo-cd util/lua): a fresh state with only the
// package, base and table libraries, the object as the global `obj`, and the script's returned
// table read as {status, message}.
func argoHealth(script string, obj map[string]any) (*verdict, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return nil, err
		}
	}
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return nil, err
	}
	table, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return nil, fmt.Errorf("returned %s, not a table", l.Get(-1).Type())
	}
	v := &verdict{}
	if s, ok := table.RawGetString("status").(lua.LString); ok {
		v.Status = string(s)
	}
	if m, ok := table.RawGetString("message").(lua.LString); ok {
		v.Message = string(m)
	}
	if !argoStatuses[v.Status] {
		return nil, fmt.Errorf("returned status %q, which Argo CD does not know", v.Status)
	}
	return v, nil
}

// toLua converts a decoded object as Argo CD does (decodeValue): objects and arrays to tables
// (arrays 1-based), numbers to numbers, null to nil.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, item := range v {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}
