package main

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// The Gateway API on the devcluster: the standard-channel CRDs of the sigs.k8s.io/gateway-api
// release named in scripts/build-devcluster.sh (copied from its Go module zip into gatewayapi/ at
// build time and embedded), a GatewayClass "devcluster", and a minimal controller for it.
//
// The controller only does what a platform's gateway reports in status, without moving traffic:
// GatewayClass Accepted; Gateway Accepted and Programmed (address 127.0.0.1), per listener
// Accepted/Programmed/ResolvedRefs and attachedRoutes; HTTPRoute, per parentRef naming one of its
// Gateways, Accepted (listener matched by sectionName/port, allowedRoutes namespaces and kinds,
// hostname intersection) and ResolvedRefs (each backendRef a Service that exists, across
// namespaces only with a ReferenceGrant).
//
// Caveats: nothing listens at the Gateway's address; parents of other controllers are left alone.
//
//go:embed gatewayapi/*.yaml
var gatewayAPIFiles embed.FS

const (
	gatewayClassName      = "devcluster"
	gatewayControllerName = "devcluster.kubefn.dev/gateway-controller"
	gatewayGroup          = "gateway.networking.k8s.io"
)

var (
	gatewayClassesGVR  = schema.GroupVersionResource{Group: gatewayGroup, Version: "v1", Resource: "gatewayclasses"}
	gatewaysGVR        = schema.GroupVersionResource{Group: gatewayGroup, Version: "v1", Resource: "gateways"}
	httpRoutesGVR      = schema.GroupVersionResource{Group: gatewayGroup, Version: "v1", Resource: "httproutes"}
	referenceGrantsGVR = schema.GroupVersionResource{Group: gatewayGroup, Version: "v1", Resource: "referencegrants"}
)

// gatewayAPICRDs decodes the embedded CustomResourceDefinitions (other documents, e.g. the
// release's safe-upgrades ValidatingAdmissionPolicy, are not installed).
func gatewayAPICRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := gatewayAPIFiles.ReadDir("gatewayapi")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		data, err := gatewayAPIFiles.ReadFile("gatewayapi/" + e.Name())
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name(), err)
			}
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name(), err)
			}
			crds = append(crds, &crd)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no Gateway API CRDs embedded (build with scripts/build-devcluster.sh)")
	}
	return crds, nil
}

// coreGatewayCRDs are the kinds the gateway controller and the operators use; the ready line waits
// for them. The release's other CRDs (GRPCRoute, TLSRoute, ListenerSet, ...) are installed right
// after, so that their schema compilation does not delay start-up.
var coreGatewayCRDs = map[string]bool{
	"gatewayclasses." + gatewayGroup:  true,
	"gateways." + gatewayGroup:        true,
	"httproutes." + gatewayGroup:      true,
	"referencegrants." + gatewayGroup: true,
}

// installGatewayAPI creates the core CRDs (all at once), waits until they are Established and
// creates the GatewayClass; it returns the remaining CRDs for installGatewayCRDs.
func installGatewayAPI(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface) (others []*apiextensionsv1.CustomResourceDefinition, err error) {
	all, err := gatewayAPICRDs()
	if err != nil {
		return nil, err
	}
	var core []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range all {
		if coreGatewayCRDs[crd.Name] {
			core = append(core, crd)
		} else {
			others = append(others, crd)
		}
	}
	if err := installGatewayCRDs(ctx, cfg, core); err != nil {
		return nil, err
	}
	return others, createGatewayClass(ctx, dyn)
}

// installGatewayCRDs creates CRDs in parallel and waits until each is Established.
func installGatewayCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(crds))
	for i, crd := range crds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("gateway API CRD: %w", err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, crd := range crds {
		for {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err == nil && crdEstablished(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("gateway API CRD %s not established", crd.Name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func createGatewayClass(ctx context.Context, dyn dynamic.Interface) error {
	deadline := time.Now().Add(60 * time.Second)
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gatewayGroup + "/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": gatewayClassName},
		"spec": map[string]any{
			"controllerName": gatewayControllerName,
			"description":    "devcluster: status only, no data plane",
		},
	}}
	for {
		_, err := dyn.Resource(gatewayClassesGVR).Create(ctx, class, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		// The CRD is Established but its REST storage may be a moment behind.
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return fmt.Errorf("GatewayClass %s: %w", gatewayClassName, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

type gatewayController struct {
	dyn     dynamic.Interface
	classes cache.GenericLister
	gws     cache.GenericLister
	routes  cache.GenericLister
	grants  cache.GenericLister
	core    informers.SharedInformerFactory
	queue   workqueue.TypedRateLimitingInterface[string]
	now     func() metav1.Time
}

func runGatewayController(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) {
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	core := informers.NewSharedInformerFactory(client, 0)
	c := &gatewayController{
		dyn: dyn, core: core, now: metav1.Now,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	key := func(prefix string, obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(prefix + k)
		}
	}
	on := func(f func(obj any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) }, DeleteFunc: f}
	}
	allRoutes := func(any) {
		objs, _ := c.routes.List(labels.Everything())
		for _, o := range objs {
			key("rt:", o)
		}
	}
	allGateways := func(any) {
		objs, _ := c.gws.List(labels.Everything())
		for _, o := range objs {
			key("gw:", o)
		}
	}
	classInf := df.ForResource(gatewayClassesGVR)
	gwInf := df.ForResource(gatewaysGVR)
	rtInf := df.ForResource(httpRoutesGVR)
	grantInf := df.ForResource(referenceGrantsGVR)
	c.classes, c.gws, c.routes, c.grants = classInf.Lister(), gwInf.Lister(), rtInf.Lister(), grantInf.Lister()
	_, _ = classInf.Informer().AddEventHandler(on(func(o any) { key("gc:", o); allGateways(o) }))
	_, _ = gwInf.Informer().AddEventHandler(on(func(o any) { key("gw:", o); allRoutes(o) }))
	_, _ = rtInf.Informer().AddEventHandler(on(func(o any) {
		key("rt:", o)
		if u, ok := o.(*unstructured.Unstructured); ok {
			for _, p := range parentGateways(u) {
				c.queue.Add("gw:" + p)
			}
		}
	}))
	_, _ = grantInf.Informer().AddEventHandler(on(allRoutes))
	_, _ = core.Core().V1().Services().Informer().AddEventHandler(on(allRoutes))
	_, _ = core.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) { allRoutes(o) }})
	df.Start(ctx.Done())
	core.Start(ctx.Done())
	df.WaitForCacheSync(ctx.Done())
	core.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); c.queue.ShutDown() }()
	for i := 0; i < 2; i++ {
		go func() {
			for {
				k, quit := c.queue.Get()
				if quit {
					return
				}
				if err := c.sync(ctx, k); err != nil && ctx.Err() == nil {
					klog.V(2).InfoS("gateway controller sync failed; retrying", "key", k, "err", err)
					c.queue.AddRateLimited(k)
				} else {
					c.queue.Forget(k)
				}
				c.queue.Done(k)
			}
		}()
	}
	klog.InfoS("gateway controller started", "class", gatewayClassName)
}

func (c *gatewayController) sync(ctx context.Context, key string) error {
	kind, k, _ := strings.Cut(key, ":")
	switch kind {
	case "gc":
		return c.syncClass(ctx, k)
	case "gw":
		return c.syncGateway(ctx, k)
	case "rt":
		return c.syncRoute(ctx, k)
	}
	return nil
}

func (c *gatewayController) get(l cache.GenericLister, key string) *unstructured.Unstructured {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	var obj runtime.Object
	var err error
	if ns == "" {
		obj, err = l.Get(name)
	} else {
		obj, err = l.ByNamespace(ns).Get(name)
	}
	if err != nil {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

func (c *gatewayController) ourClass(name string) bool {
	class := c.get(c.classes, name)
	if class == nil {
		return false
	}
	ctrl, _, _ := unstructured.NestedString(class.Object, "spec", "controllerName")
	return ctrl == gatewayControllerName
}

func (c *gatewayController) syncClass(ctx context.Context, name string) error {
	class := c.get(c.classes, name)
	if class == nil || !c.ourClass(name) {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(class.Object, "status", "conditions")
	next := setCondition(conds, c.now(), class.GetGeneration(), "Accepted", "True", "Accepted", "handled by the devcluster gateway controller")
	return c.writeStatus(ctx, gatewayClassesGVR, class, map[string]any{"conditions": next}, "conditions")
}

type listener struct {
	name, protocol, hostname string
	port                     int64
	from                     string // Same | All | Selector | None
	selector                 labels.Selector
	kinds                    []string // allowed route kinds; empty = the protocol's default
}

func listenersOf(gw *unstructured.Unstructured) []listener {
	raw, _, _ := unstructured.NestedSlice(gw.Object, "spec", "listeners")
	var out []listener
	for _, r := range raw {
		m, _ := r.(map[string]any)
		l := listener{from: "Same"}
		l.name, _, _ = unstructured.NestedString(m, "name")
		l.protocol, _, _ = unstructured.NestedString(m, "protocol")
		l.hostname, _, _ = unstructured.NestedString(m, "hostname")
		l.port, _, _ = unstructured.NestedInt64(m, "port")
		if from, ok, _ := unstructured.NestedString(m, "allowedRoutes", "namespaces", "from"); ok {
			l.from = from
		}
		if sel, ok, _ := unstructured.NestedMap(m, "allowedRoutes", "namespaces", "selector"); ok {
			var ls metav1.LabelSelector
			if runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &ls) == nil {
				l.selector, _ = metav1.LabelSelectorAsSelector(&ls)
			}
		}
		kinds, _, _ := unstructured.NestedSlice(m, "allowedRoutes", "kinds")
		for _, k := range kinds {
			km, _ := k.(map[string]any)
			kind, _, _ := unstructured.NestedString(km, "kind")
			l.kinds = append(l.kinds, kind)
		}
		out = append(out, l)
	}
	return out
}

func (l listener) supportsHTTPRoute() bool {
	if l.protocol != "HTTP" && l.protocol != "HTTPS" {
		return false
	}
	if len(l.kinds) == 0 {
		return true
	}
	for _, k := range l.kinds {
		if k == "HTTPRoute" {
			return true
		}
	}
	return false
}

func (c *gatewayController) namespaceAllowed(l listener, gwNS, routeNS string) bool {
	switch l.from {
	case "All":
		return true
	case "Same", "":
		return gwNS == routeNS
	case "Selector":
		if l.selector == nil {
			return false
		}
		ns, err := c.core.Core().V1().Namespaces().Lister().Get(routeNS)
		return err == nil && l.selector.Matches(labels.Set(ns.Labels))
	}
	return false
}

// hostnamesIntersect: a listener without hostname takes any route; a route without hostnames
// takes the listener's; otherwise one route hostname must match the listener's (wildcards
// "*.example.com" match one or more leading labels).
func hostnamesIntersect(listenerHost string, routeHosts []string) bool {
	if listenerHost == "" || len(routeHosts) == 0 {
		return true
	}
	match := func(wild, host string) bool {
		if suffix, ok := strings.CutPrefix(wild, "*"); ok {
			return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
		}
		return wild == host
	}
	for _, h := range routeHosts {
		if h == listenerHost || match(listenerHost, h) || match(h, listenerHost) {
			return true
		}
	}
	return false
}

type parentRef struct {
	raw         map[string]any
	namespace   string
	name        string
	sectionName string
	port        int64
}

// gatewayParents: the route's parentRefs that name a Gateway (namespace defaulted).
func gatewayParents(route *unstructured.Unstructured) []parentRef {
	raw, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	var out []parentRef
	for _, r := range raw {
		m, _ := r.(map[string]any)
		group, ok, _ := unstructured.NestedString(m, "group")
		if ok && group != gatewayGroup {
			continue
		}
		if kind, ok, _ := unstructured.NestedString(m, "kind"); ok && kind != "Gateway" {
			continue
		}
		p := parentRef{raw: m, namespace: route.GetNamespace()}
		if ns, ok, _ := unstructured.NestedString(m, "namespace"); ok && ns != "" {
			p.namespace = ns
		}
		p.name, _, _ = unstructured.NestedString(m, "name")
		p.sectionName, _, _ = unstructured.NestedString(m, "sectionName")
		p.port, _, _ = unstructured.NestedInt64(m, "port")
		out = append(out, p)
	}
	return out
}

func parentGateways(route *unstructured.Unstructured) []string {
	var keys []string
	for _, p := range gatewayParents(route) {
		keys = append(keys, p.namespace+"/"+p.name)
	}
	return keys
}

// acceptance decides whether the route attaches to the Gateway, and on which listeners.
func (c *gatewayController) acceptance(route, gw *unstructured.Unstructured, p parentRef) (attached []string, reason, message string) {
	hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	matchedRef, allowedNS := false, false
	for _, l := range listenersOf(gw) {
		if (p.sectionName != "" && p.sectionName != l.name) || (p.port != 0 && p.port != l.port) {
			continue
		}
		matchedRef = true
		if !l.supportsHTTPRoute() || !c.namespaceAllowed(l, gw.GetNamespace(), route.GetNamespace()) {
			continue
		}
		allowedNS = true
		if hostnamesIntersect(l.hostname, hosts) {
			attached = append(attached, l.name)
		}
	}
	switch {
	case len(attached) > 0:
		return attached, "Accepted", fmt.Sprintf("attached to listener(s) %s", strings.Join(attached, ", "))
	case !matchedRef:
		return nil, "NoMatchingParent", "no listener matches the parentRef's sectionName/port"
	case !allowedNS:
		return nil, "NotAllowedByListeners", fmt.Sprintf("no listener allows HTTPRoutes from namespace %s", route.GetNamespace())
	default:
		return nil, "NoMatchingListenerHostname", "no listener hostname matches the route's hostnames"
	}
}

// resolvedRefs checks each backendRef: a Service that exists, in another namespace only with a
// ReferenceGrant from this route's namespace.
func (c *gatewayController) resolvedRefs(route *unstructured.Unstructured) (status, reason, message string) {
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		refs, _, _ := unstructured.NestedSlice(rm, "backendRefs")
		for _, b := range refs {
			bm, _ := b.(map[string]any)
			group, _, _ := unstructured.NestedString(bm, "group")
			kind, ok, _ := unstructured.NestedString(bm, "kind")
			if !ok {
				kind = "Service"
			}
			name, _, _ := unstructured.NestedString(bm, "name")
			ns, ok, _ := unstructured.NestedString(bm, "namespace")
			if !ok || ns == "" {
				ns = route.GetNamespace()
			}
			if group != "" || kind != "Service" {
				return "False", "InvalidKind", fmt.Sprintf("backendRef %s %s/%s is not a Service", kind, ns, name)
			}
			if ns != route.GetNamespace() && !c.granted(route.GetNamespace(), ns, name) {
				return "False", "RefNotPermitted", fmt.Sprintf("backendRef Service %s/%s: no ReferenceGrant in %s allows HTTPRoutes from %s", ns, name, ns, route.GetNamespace())
			}
			if _, err := c.core.Core().V1().Services().Lister().Services(ns).Get(name); err != nil {
				return "False", "BackendNotFound", fmt.Sprintf("backendRef Service %s/%s not found", ns, name)
			}
		}
	}
	return "True", "ResolvedRefs", "all backendRefs resolved"
}

func (c *gatewayController) granted(fromNS, toNS, service string) bool {
	objs, _ := c.grants.ByNamespace(toNS).List(labels.Everything())
	for _, o := range objs {
		u, _ := o.(*unstructured.Unstructured)
		if u == nil {
			continue
		}
		from, _, _ := unstructured.NestedSlice(u.Object, "spec", "from")
		to, _, _ := unstructured.NestedSlice(u.Object, "spec", "to")
		fromOK, toOK := false, false
		for _, f := range from {
			fm, _ := f.(map[string]any)
			if fm["group"] == gatewayGroup && fm["kind"] == "HTTPRoute" && fm["namespace"] == fromNS {
				fromOK = true
			}
		}
		for _, t := range to {
			tm, _ := t.(map[string]any)
			name, hasName := tm["name"]
			if (tm["group"] == "" || tm["group"] == nil) && tm["kind"] == "Service" && (!hasName || name == service) {
				toOK = true
			}
		}
		if fromOK && toOK {
			return true
		}
	}
	return false
}

func (c *gatewayController) syncRoute(ctx context.Context, key string) error {
	route := c.get(c.routes, key)
	if route == nil {
		return nil
	}
	existing, _, _ := unstructured.NestedSlice(route.Object, "status", "parents")
	var parents []any
	// Keep other controllers' entries.
	for _, e := range existing {
		em, _ := e.(map[string]any)
		if ctrl, _, _ := unstructured.NestedString(em, "controllerName"); ctrl != gatewayControllerName {
			parents = append(parents, e)
		}
	}
	refStatus, refReason, refMessage := c.resolvedRefs(route)
	for _, p := range gatewayParents(route) {
		gw := c.get(c.gws, p.namespace+"/"+p.name)
		if gw == nil {
			continue
		}
		class, _, _ := unstructured.NestedString(gw.Object, "spec", "gatewayClassName")
		if !c.ourClass(class) {
			continue
		}
		var prev []any
		for _, e := range existing {
			em, _ := e.(map[string]any)
			if ctrl, _, _ := unstructured.NestedString(em, "controllerName"); ctrl == gatewayControllerName &&
				reflect.DeepEqual(em["parentRef"], p.raw) {
				prev, _, _ = unstructured.NestedSlice(em, "conditions")
			}
		}
		attached, reason, message := c.acceptance(route, gw, p)
		accepted := "False"
		if len(attached) > 0 {
			accepted = "True"
		}
		now, gen := c.now(), route.GetGeneration()
		conds := setCondition(prev, now, gen, "Accepted", accepted, reason, message)
		conds = setCondition(conds, now, gen, "ResolvedRefs", refStatus, refReason, refMessage)
		parents = append(parents, map[string]any{
			"parentRef":      p.raw,
			"controllerName": gatewayControllerName,
			"conditions":     conds,
		})
	}
	if parents == nil {
		parents = []any{}
	}
	return c.writeStatus(ctx, httpRoutesGVR, route, map[string]any{"parents": parents}, "parents")
}

func (c *gatewayController) syncGateway(ctx context.Context, key string) error {
	gw := c.get(c.gws, key)
	if gw == nil {
		return nil
	}
	class, _, _ := unstructured.NestedString(gw.Object, "spec", "gatewayClassName")
	if !c.ourClass(class) {
		return nil
	}
	// attachedRoutes per listener.
	counts := map[string]int64{}
	routes, _ := c.routes.List(labels.Everything())
	for _, o := range routes {
		route, _ := o.(*unstructured.Unstructured)
		if route == nil {
			continue
		}
		for _, p := range gatewayParents(route) {
			if p.namespace != gw.GetNamespace() || p.name != gw.GetName() {
				continue
			}
			attached, _, _ := c.acceptance(route, gw, p)
			for _, l := range attached {
				counts[l]++
			}
		}
	}
	now, gen := c.now(), gw.GetGeneration()
	prevListeners := map[string][]any{}
	raw, _, _ := unstructured.NestedSlice(gw.Object, "status", "listeners")
	for _, r := range raw {
		m, _ := r.(map[string]any)
		name, _, _ := unstructured.NestedString(m, "name")
		prevListeners[name], _, _ = unstructured.NestedSlice(m, "conditions")
	}
	var listeners []any
	for _, l := range listenersOf(gw) {
		conds := prevListeners[l.name]
		kinds := []any{}
		if l.protocol == "HTTP" || l.protocol == "HTTPS" {
			if l.supportsHTTPRoute() {
				kinds = append(kinds, map[string]any{"group": gatewayGroup, "kind": "HTTPRoute"})
			}
			conds = setCondition(conds, now, gen, "Accepted", "True", "Accepted", "listener accepted")
			conds = setCondition(conds, now, gen, "Programmed", "True", "Programmed", "listener programmed")
		} else {
			conds = setCondition(conds, now, gen, "Accepted", "False", "UnsupportedProtocol", "the devcluster gateway serves HTTP and HTTPS listeners only")
			conds = setCondition(conds, now, gen, "Programmed", "False", "Invalid", "listener not accepted")
		}
		conds = setCondition(conds, now, gen, "ResolvedRefs", "True", "ResolvedRefs", "references resolved")
		conds = setCondition(conds, now, gen, "Conflicted", "False", "NoConflicts", "no conflicts")
		listeners = append(listeners, map[string]any{
			"name": l.name, "supportedKinds": kinds, "attachedRoutes": counts[l.name], "conditions": conds,
		})
	}
	conds, _, _ := unstructured.NestedSlice(gw.Object, "status", "conditions")
	conds = setCondition(conds, now, gen, "Accepted", "True", "Accepted", "accepted by the devcluster gateway controller")
	conds = setCondition(conds, now, gen, "Programmed", "True", "Programmed", "programmed (status only: the devcluster has no data plane)")
	status := map[string]any{
		"conditions": conds,
		"addresses":  []any{map[string]any{"type": "IPAddress", "value": "127.0.0.1"}},
	}
	if listeners != nil {
		status["listeners"] = listeners
	}
	return c.writeStatus(ctx, gatewaysGVR, gw, status, "conditions", "addresses", "listeners")
}

// writeStatus replaces the given status fields and writes only if they changed.
func (c *gatewayController) writeStatus(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, fields map[string]any, names ...string) error {
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	changed := false
	for _, n := range names {
		want, ok := fields[n]
		if !ok {
			if _, had := status[n]; had {
				delete(status, n)
				changed = true
			}
			continue
		}
		if !jsonEqual(status[n], want) {
			status[n] = want
			changed = true
		}
	}
	if !changed {
		return nil
	}
	out := obj.DeepCopy()
	if err := unstructured.SetNestedField(out.Object, runtime.DeepCopyJSONValue(status), "status"); err != nil {
		return err
	}
	var err error
	if out.GetNamespace() == "" {
		_, err = c.dyn.Resource(gvr).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	} else {
		_, err = c.dyn.Resource(gvr).Namespace(out.GetNamespace()).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // a newer version is queued, or it is gone
	}
	return err
}

// setCondition sets one condition, keeping lastTransitionTime unless the status flips; the
// result is sorted by type, so that equal sets compare equal.
func setCondition(conds []any, now metav1.Time, generation int64, typ, status, reason, message string) []any {
	out := make([]any, 0, len(conds)+1)
	transition := now.UTC().Format(time.RFC3339)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			if m["status"] == status {
				if t, ok := m["lastTransitionTime"].(string); ok {
					transition = t
				}
			}
			continue
		}
		out = append(out, c)
	}
	out = append(out, map[string]any{
		"type": typ, "status": status, "reason": reason, "message": message,
		"observedGeneration": generation, "lastTransitionTime": transition,
	})
	sort.Slice(out, func(i, j int) bool {
		a, _ := out[i].(map[string]any)
		b, _ := out[j].(map[string]any)
		return fmt.Sprint(a["type"]) < fmt.Sprint(b["type"])
	})
	return out
}

// jsonEqual compares two JSON-shaped values, treating integer kinds alike (the informer decodes
// numbers as int64, freshly built values may be int).
func jsonEqual(a, b any) bool {
	return reflect.DeepEqual(runtime.DeepCopyJSONValue(normalizeJSON(a)), runtime.DeepCopyJSONValue(normalizeJSON(b)))
}

func normalizeJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalizeJSON(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalizeJSON(x)
		}
		return out
	case int:
		return int64(t)
	case int32:
		return int64(t)
	}
	return v
}
