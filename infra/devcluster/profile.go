package main

import "fmt"

// profile is how kind the cluster is to its clients. The fast profile (the default) serves tests
// that wait for events; the production profile is shaped like a kubeadm or managed cluster, so a
// test run on it cannot pass by something no real cluster offers.
type profile string

const (
	// profileFast: a plain-HTTP pass-through beside the API server, audit batches sent within
	// 1 s, ServiceAccount tokens for as long as asked.
	profileFast profile = "fast"
	// profileProduction: the API server alone, TLS with the private CA (no pass-through); the
	// audit webhook with exactly the documented flags (the API server's default 30 s batch wait
	// and 10 s initial backoff); ServiceAccount tokens that expire within an hour.
	profileProduction profile = "production"
)

func parseProfile(s string) (profile, error) {
	switch profile(s) {
	case profileFast, profileProduction:
		return profile(s), nil
	case "":
		return profileFast, nil
	}
	return "", fmt.Errorf("--profile: %q is neither %q nor %q", s, profileFast, profileProduction)
}
