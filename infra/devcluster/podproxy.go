package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// defaultProxyImage is the repository of kubefn's forward-proxy image (any tag). Pods whose
// container runs it get a real HTTP forward proxy at <podIP>:<containerPort> on the simulated
// node, as if the container were running: that is what a Managed Proxy's health probes go
// through.
const defaultProxyImage = "ghcr.io/kubefn/forward-proxy"

// podProxies runs one forward proxy per Pod of the proxy image, for as long as the Pod is
// Running on the simulated node.
type podProxies struct {
	image string // repository, without tag or digest

	mu      sync.Mutex
	servers map[types.UID]*http.Server
}

func newPodProxies(image string) *podProxies {
	return &podProxies{image: image, servers: map[types.UID]*http.Server{}}
}

// imageRepository strips the tag and digest: "ghcr.io/x/y:1.2@sha256:..." -> "ghcr.io/x/y".
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// proxyPort is the port the Pod's proxy-image container declares (the one named "proxy", else
// its first TCP port, else 3128), or 0 when no container runs the proxy image.
func (pp *podProxies) proxyPort(pod *corev1.Pod) int32 {
	if pp.image == "" {
		return 0
	}
	for _, c := range pod.Spec.Containers {
		if imageRepository(c.Image) != pp.image {
			continue
		}
		var first int32
		for _, p := range c.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				continue
			}
			if p.Name == "proxy" {
				return p.ContainerPort
			}
			if first == 0 {
				first = p.ContainerPort
			}
		}
		if first != 0 {
			return first
		}
		return 3128
	}
	return 0
}

// ensure starts the Pod's forward proxy at ip (idempotent). An error means the address could not
// be bound, e.g. a test already serves there.
func (pp *podProxies) ensure(pod *corev1.Pod, ip string) error {
	port := pp.proxyPort(pod)
	if port == 0 || ip == "" {
		return nil
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if _, ok := pp.servers[pod.UID]; ok {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		return fmt.Errorf("forward proxy for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	srv := &http.Server{Handler: forwardProxy(), ReadHeaderTimeout: 30 * time.Second}
	pp.servers[pod.UID] = srv
	go func() { _ = srv.Serve(l) }()
	klog.InfoS("pod forward proxy listening", "pod", pod.Namespace+"/"+pod.Name, "addr", l.Addr())
	return nil
}

// stop closes the Pod's forward proxy, if it has one: its container "stopped".
func (pp *podProxies) stop(uid types.UID) {
	pp.mu.Lock()
	srv, ok := pp.servers[uid]
	delete(pp.servers, uid)
	pp.mu.Unlock()
	if ok {
		_ = srv.Close()
	}
}

func (pp *podProxies) stopAll() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for uid, srv := range pp.servers {
		_ = srv.Close()
		delete(pp.servers, uid)
	}
}

// forwardProxy serves CONNECT (a TCP tunnel) and absolute-form requests (GET http://host/...),
// the two ways HTTP clients use a forward proxy. Hop-by-hop headers are dropped.
func forwardProxy() http.Handler {
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			tunnel(w, r)
			return
		}
		if r.URL.Host == "" || (r.URL.Scheme != "http" && r.URL.Scheme != "https") {
			http.Error(w, "forward proxy: want an absolute-form URL or CONNECT", http.StatusBadRequest)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
			out.Header.Del(h)
		}
		resp, err := transport.RoundTrip(out)
		if err != nil {
			http.Error(w, "forward proxy: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}

func tunnel(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	upstream, err := (&net.Dialer{}).DialContext(ctx, "tcp", r.Host)
	cancel()
	if err != nil {
		http.Error(w, "forward proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		http.Error(w, "forward proxy: cannot hijack", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	_, _ = client.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n"))
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		_, _ = upstream.Write(b)
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
	client.Close()
	upstream.Close()
}
