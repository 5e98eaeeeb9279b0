package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// startHTTPProxy serves plain HTTP on 127.0.0.1 for clients that cannot trust a private CA
// (workerd in the Workers tests). Unlike `kubectl proxy` it adds NO credentials: the caller's
// Authorization header is passed through unchanged, so RBAC applies to whatever bearer token the
// caller sends (no token = system:anonymous). Responses are flushed as they arrive, so watches
// stream; upgrade requests (exec, port-forward) are passed through by ReverseProxy.
func startHTTPProxy(port int, apiserver string, caPEM []byte) (*http.Server, string, error) {
	target, err := url.Parse(apiserver)
	if err != nil {
		return nil, "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, "", fmt.Errorf("bad CA PEM")
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target) // also sets Host; X-Forwarded-* are not added
		},
		Transport:     transport,
		FlushInterval: -1,
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, "", fmt.Errorf("http proxy listen: %w", err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String(), nil
}
