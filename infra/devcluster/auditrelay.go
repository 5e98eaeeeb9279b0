package main

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// startAuditRelay exists because client-go (which the API server's audit webhook uses) only sends
// a kubeconfig's bearer token over TLS: for an http:// URL the token would silently be dropped.
// So for a plain-HTTP --audit-webhook-url the API server posts to this loopback HTTPS endpoint
// (serving cert from the cluster CA, bearer token checked) and it forwards each batch, with the
// same Authorization header, to the real URL. Returns the URL to put in the webhook kubeconfig.
func startAuditRelay(target string, token string, p *pki) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("--audit-webhook-url: %w", err)
	}
	if u.Scheme == "https" {
		return target, nil // client-go sends the token itself
	}
	if u.Scheme != "http" {
		return "", fmt.Errorf("--audit-webhook-url must be http:// or https://, got %q", target)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	want := []byte("Bearer " + token)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := *u
		out.RawQuery = r.URL.RawQuery
		req, err := http.NewRequestWithContext(r.Context(), r.Method, out.String(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(l, p.CertFile, p.KeyFile) }()
	return fmt.Sprintf("https://%s/audit", l.Addr().String()), nil
}
